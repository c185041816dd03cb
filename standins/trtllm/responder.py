"""One Triton request's response side (ModelInstanceState::WaitForResponse): every executor
result becomes a response on the request's ResponseChannel; the FINAL flag goes with the
final result of its last pending row (row output.flags); an executor error is final for its
row and sent the same way (row error.executor_response).  When all rows are final the
request's token counts go to the token-length histograms (row metric.token_len).

Tensors and errors are built by injected callables, so tests drive this without Triton.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Collection

import numpy as np

from contract.upstream.backend_semantics import BackendSemantics
from model_repository.triton.response_channel import ResponseChannel
from standins.trtllm.request import ExecutorRequest
from standins.trtllm.results import Result, response_arrays
from standins.trtllm.upstream import StandinLimitation, UpstreamError

MakeResponse = Callable[[dict[str, np.ndarray]], Any]  # tensors -> a response
MakeError = Callable[[str, str], Any]  # (code, message) -> an error response
TokenCounts = Callable[[int, int], None]  # (input tokens, output tokens) of a finished request


class Responder:
    def __init__(self, sem: BackendSemantics, channel: ResponseChannel, requested: Collection[str],
                 make_response: MakeResponse, make_error: MakeError, on_done: TokenCounts | None = None) -> None:
        self._sem = sem
        self.channel = channel
        self._requested = frozenset(requested)
        self._make_response = make_response
        self._make_error = make_error
        self._on_done = on_done
        self._lock = threading.Lock()
        self._pending: dict[int, int] = {}  # executor id -> batch index
        self._batch_size = 1
        self._input_tokens = 0
        self._output_tokens = 0
        self._prompt_tokens_echoed = 0  # non-streaming rows that include their input

    def bind(self, executor_ids: list[int], requests: list[ExecutorRequest]) -> None:
        """The executor names the rows' ids (under its lock, before any row can produce)."""
        prompts = [len(r.inputs.input_ids) for r in requests]
        echoing = [not r.exclude_input_in_output and not r.inputs.streaming for r in requests]
        with self._lock:
            self._pending = {eid: i for i, eid in enumerate(executor_ids)}
            self._batch_size = len(executor_ids)
            self._input_tokens = sum(prompts)
            self._prompt_tokens_echoed = sum(n for n, echo in zip(prompts, echoing) if echo)

    def is_cancelled(self) -> bool:
        return self.channel.is_cancelled()

    def result(self, executor_id: int, result: Result) -> None:
        with self._lock:
            index = self._pending.get(executor_id)
            if index is None:
                return
            try:
                arrays = response_arrays(self._sem, result, self._requested, batch_index=index,
                                         batch_size=self._batch_size)
            except UpstreamError as e:  # row error.required_outputs: the response carries the error
                self._send_final(executor_id, self._make_error(e.code, e.message))
                return
            self._output_tokens += len(result.output_ids)
            response = self._make_response(arrays)
            if result.final:
                self._send_final(executor_id, response)
            else:
                self.channel.send(response)

    def failed(self, executor_id: int, err: UpstreamError | StandinLimitation) -> None:
        with self._lock:
            if executor_id in self._pending:
                self._send_final(executor_id, self._make_error(err.code, err.message))

    def _send_final(self, executor_id: int, response: Any) -> None:
        """Upstream: signalFinal = this is the last pending row; then the row is forgotten."""
        last = len(self._pending) == 1
        self.channel.send(response, final=last)
        del self._pending[executor_id]
        if last and self._on_done is not None:
            self._on_done(self._input_tokens, self._output_tokens - self._prompt_tokens_echoed)


def requested_outputs(names: Collection[str], declared: Collection[str]) -> frozenset[str]:
    """The outputs the request asked for (Triton asks for every declared output when a client
    names none; it refuses names the config does not declare)."""
    return frozenset(names) if names else frozenset(declared)
