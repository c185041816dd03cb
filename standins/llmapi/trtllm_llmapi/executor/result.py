"""tensorrt_llm.executor.result (stand-in): how the LLM API turns the executor's responses into
the RequestOutput a caller iterates, and the iteration-stats iterable.

Reproduced from RESULT = NVIDIA/TensorRT-LLM tensorrt_llm/executor/result.py read at stored
commit a678b91aafbeff265cd0b764abb59d7def624ac2 (the version contract/upstream/data/
llmapi_1.2.1.json reads as result_py_read; the v1.2.1 tag's own file is not stored, and the
1.2.1 fork commit ca88df0 could not be fetched).  The same logic stands in the older stored
version 005bc848 (one sequence per response, best_of re-sorting, finish reasons, stop-word
trimming under `_done`; its log probs are the response's whole list assigned rather than the
new ones appended: the same list), so the behaviours below do not hang on the exact release.  Line
numbers are those of a678b91a, counted in its stored text.  EXECUTOR = tensorrt_llm/executor/
executor.py at stored commit ed53795b33fc139493f762a1c6c53f691cf52d38 (lines counted likewise).

Left out, because it runs only with SamplingParams.detokenize and a tokenizer (RESULT 610;
the engine model always sends detokenize=False): DetokenizedGenerationResultBase's text, stop
strings and the abort it makes on a stop string (RESULT 597-649).  PR #9802 ("output
corruption when n > 1 and streaming"; whether 1.2.1 has it is not confirmed) resets
_last_token_ids_len in that detokenizing loop only, so it changes nothing for such requests.
Also left out: beam search, disaggregated serving, Ray queues, perf metrics.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import responses
from .responses import FinishReason, Response


class RequestError(RuntimeError):
    """tensorrt_llm.executor.utils.RequestError: a per-request error the consumer sees
    (EXECUTOR 264-270, 280: _handle_background_error turns an error message into it and raises)."""


@dataclass(slots=True)
class Logprob:
    """RESULT 43-47."""

    logprob: float
    rank: Optional[int] = None


@dataclass
class CompletionOutput:
    """RESULT 92-157: the fields the PyTorch backend fills, and the diffs, which are the slices
    after the lengths _handle_sequence recorded at this output's own last response."""

    index: int
    text: str = ""  # detokenize=False: stays empty
    token_ids: list = field(default_factory=list)
    cumulative_logprob: Optional[float] = None
    logprobs: list = field(default_factory=list)
    prompt_logprobs: list = field(default_factory=list)
    finish_reason: Optional[str] = None  # 'stop' | 'length' | 'timeout' | 'cancelled'
    stop_reason: Optional[int | str] = None
    _last_text_len: int = field(default=0, repr=False)
    _last_token_ids_len: int = field(default=0, repr=False)
    _last_logprobs_len: int = field(default=0, repr=False)

    @property
    def length(self) -> int:
        return len(self.token_ids)

    @property
    def token_ids_diff(self) -> list:
        return self.token_ids[self._last_token_ids_len:]

    @property
    def logprobs_diff(self) -> list:
        return self.logprobs[self._last_logprobs_len:]


def stop_reasons_and_words(params) -> list[tuple[Any, list[int]]]:
    """SamplingParams._get_stop_reasons_and_words (tensorrt_llm/sampling_params.py at a98a9061,
    lines not counted):
    each stop token id is its own one-token stop word; stop strings need the tokenizer (the
    stand-in refuses them: cpu_engine.UNSUPPORTED)."""
    return [(t, [t]) for t in (params.stop_token_ids or [])]


class GenerationResult:
    """GenerationResultBase + GenerationResult (RESULT 251-830), for one request."""

    def __init__(self, request_id: int, sampling_params, streaming: bool,
                 abort_request: Callable[[int], None] = lambda request_id: None) -> None:
        self.id = request_id
        self.sampling_params = sampling_params
        self._streaming = streaming
        self._done = False
        self._aborted = False
        self._abort_request = abort_request
        self.decoding_iter = 0
        # RESULT 289-294: in sampling the executor returns best_of sequences, of which the
        # LLM API keeps the best n by cumulative log prob (`outputs`)
        self._outputs = [CompletionOutput(i) for i in range(sampling_params.best_of)]
        self._loop = asyncio.get_running_loop()  # RESULT 282-287: has_event_loop() -> AsyncQueue
        self._queue: asyncio.Queue = asyncio.Queue()

    @property
    def request_id(self) -> int:
        return self.id

    @property
    def outputs(self) -> list[CompletionOutput]:
        """RESULT 311-327: n == best_of: the first n in index order.  Otherwise every read sorts
        all best_of outputs by cumulative log prob (None last), renumbers their `index`, and
        returns the best n - which sample is output i can change from one read to the next."""
        p = self.sampling_params
        if p.use_beam_search or p.n == p.best_of:
            return self._outputs[:p.n]
        ranked = sorted(self._outputs, reverse=True,
                        key=lambda o: o.cumulative_logprob if o.cumulative_logprob is not None else float("-inf"))
        for i, out in enumerate(ranked):
            out.index = i
        return ranked[:p.n]

    @property
    def finished(self) -> bool:
        return self._done

    def aborted(self) -> bool:
        return self._aborted

    def abort(self) -> None:
        """RESULT 711-716: the executor aborts the request (abort_request); responses that
        follow carry FinishReason.CANCELLED."""
        self._abort_request(self.request_id)
        self._aborted = True

    # --- the executor's side: responses arrive from another thread --------------------------
    def post(self, response: Response) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, response)

    # --- the consumer's side ----------------------------------------------------------------
    def __aiter__(self):
        return self

    async def __anext__(self):
        """RESULT 798-803 and 749-757: one step = one response handled (one sequence's), then self."""
        if self._done:
            raise StopAsyncIteration
        self._handle_response(await self._queue.get())
        return self

    async def aresult(self):
        while not self._done:
            self._handle_response(await self._queue.get())
        return self

    def _handle_response(self, response: Response) -> None:
        """RESULT 444-550 (481-485, 492, 505-515): an error raises in the consumer (the background error handler);
        `_done` is the response's is_final - every sequence finished, not this one - and only
        sequence_index's output is touched (outside beam search)."""
        if response.has_error():
            raise RequestError(response.error_msg)
        result = response.result
        self._done = result.is_final
        self.decoding_iter = result.decoding_iter
        self._handle_sequence(result.finish_reasons, result, result.sequence_index)

    def _handle_sequence(self, finish_reasons, result, sequence_index: int) -> None:
        """RESULT 338-438 (PyTorch backend, no beam search: src_idx 0): 352 and 357 (this output's
        diffs start where its token_ids ended), 359-360, 370-390 (the response's log probs: since
        PR #8785 only its new ones, appended; before it every one so far, of which the new ones are
        taken: responses.INCREMENTAL_LOG_PROBS), 404-408 (cancelled), 413-437 (finish reasons and
        the stop-word trim only when the whole request is done)."""
        output = self._outputs[sequence_index]
        output._last_token_ids_len = len(output.token_ids)  # this output's diffs only
        output.token_ids.extend(result.output_token_ids[0])
        if result.cum_log_probs is not None:
            output.cumulative_logprob = result.cum_log_probs[0]
        if result.log_probs is not None:
            output._last_logprobs_len = len(output.logprobs)
            if responses.INCREMENTAL_LOG_PROBS:  # PR #8785: the response holds only its new log probs
                output.logprobs += result.log_probs[0]
            else:  # before it: every log prob so far, of which the new ones are taken
                assert output._last_logprobs_len <= len(result.log_probs[0])
                output.logprobs += result.log_probs[0][output._last_logprobs_len:]
            if finish_reasons[0] is not FinishReason.CANCELLED:
                if len(output.logprobs) > output.length:
                    output.logprobs = output.logprobs[:output.length]
                assert len(output.logprobs) == output.length
        if finish_reasons and finish_reasons[0] is FinishReason.CANCELLED:
            output.finish_reason = "cancelled"  # n > 1 cancelled: every output says so
        if self._done:  # finish reasons and stop-word trimming only at the request's last response
            self._finish(output, finish_reasons[0])

    def _finish(self, output: CompletionOutput, reason: FinishReason) -> None:
        if reason in (FinishReason.END_ID, FinishReason.STOP_WORDS):
            output.finish_reason = "stop"
        if reason is FinishReason.STOP_WORDS:
            for stop_reason, stop_ids in stop_reasons_and_words(self.sampling_params):
                if output.token_ids[-len(stop_ids):] == stop_ids:
                    output.stop_reason = stop_reason
                    if not self.sampling_params.include_stop_str_in_output:
                        output.token_ids = output.token_ids[:-len(stop_ids)]  # logprobs keep theirs
                    break
        elif reason is FinishReason.LENGTH:
            output.finish_reason = "length"
        elif reason is FinishReason.TIMED_OUT:
            output.finish_reason = "timeout"
        elif reason not in (FinishReason.END_ID, FinishReason.CANCELLED):
            raise ValueError(f"Unknown finish reason: {reason}")


async def _no_stats():
    """EXECUTOR 54-56 (empty_async_iterable), 325-329: get_stats_async before any request."""
    if False:  # pragma: no cover - an async generator that yields nothing
        yield


class IterationResult:
    """RESULT 833-883: the iteration stats queued since the last read, as one iterable shared by
    every get_stats_async call.  `__anext__` waits `timeout` for the next stat; the first wait
    that times out marks the iterable done, and it stays done - every later `async for` ends at
    once - until mark_undone(), which the executor calls only when a new request is submitted
    (EXECUTOR 238-250 _maybe_initialize_iteration_results; 319-332 aget_stats hands out the
    same object after set_timeout)."""

    def __init__(self) -> None:
        self._done = False
        self._timeout: Optional[float] = 2
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()

    def set_timeout(self, timeout: Optional[float]) -> None:
        self._timeout = timeout

    def mark_undone(self) -> None:
        self._done = False

    def put(self, data: str) -> None:
        """A stat (a JSON string, row stats.iteration_json) from the executor's thread."""
        self._loop.call_soon_threadsafe(self._queue.put_nowait, data)

    def __aiter__(self):
        return self

    async def __anext__(self) -> dict:
        if self._done:
            raise StopAsyncIteration
        try:
            data = await asyncio.wait_for(self._queue.get(), self._timeout)
        except asyncio.TimeoutError:
            self._done = True
            raise StopAsyncIteration
        return json.loads(data)  # a dict: IterationResult parses what the worker serialized


def no_stats():
    return _no_stats()
