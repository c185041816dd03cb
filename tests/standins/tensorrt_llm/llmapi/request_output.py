"""RequestOutput / CompletionOutput as the table describes them (rows result.fields,
result.diffs, result.logprobs, result.abort), fed by the CPU engine's step thread.

The CPU engine (model_repository.cpu_engine.EngineRunner) calls the sink from its thread;
each call is handed to the asyncio loop that created the output (upstream's results are
bound to the running loop too), where `async for` reads it.  `abort()` is seen by the
engine through the sink's is_cancelled() at its next step."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Optional


@dataclass(slots=True)
class Logprob:
    """Row result.logprobs."""

    logprob: float
    rank: Optional[int] = None


@dataclass
class CompletionOutput:
    index: int
    text: str = ""  # detokenize=False: stays empty (the LLM has no tokenizer here)
    token_ids: list = field(default_factory=list)
    cumulative_logprob: Optional[float] = None
    logprobs: list = field(default_factory=list)
    finish_reason: Optional[str] = None  # 'stop' | 'length' | 'timeout' | 'cancelled'
    stop_reason: Optional[int] = None
    _last_token_ids_len: int = 0
    _last_logprobs_len: int = 0

    @property
    def token_ids_diff(self) -> list:
        return self.token_ids[self._last_token_ids_len:]

    @property
    def logprobs_diff(self) -> list:
        return self.logprobs[self._last_logprobs_len:]


class _Sink:
    """The CPU runner's ResponseSink for one request."""

    def __init__(self, output: "RequestOutput") -> None:
        self._output = output

    def is_cancelled(self) -> bool:
        return self._output._aborted

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None) -> None:
        self._output._post((list(ids), list(log_probs), cum_log_prob, final, None, sequence, top))

    def fail(self, message, code=None) -> None:  # the whole request
        self._output._post(([], [], None, True, (getattr(code, "value", code), message), None, None))


class RequestOutput:
    def __init__(self, request_id: int, prompt_token_ids: list, sampling_params, streaming: bool,
                 withdraw=lambda sink: False) -> None:
        self.request_id = request_id
        self.prompt = None
        self.prompt_token_ids = prompt_token_ids
        # SamplingParams.n samples (row sampling.field.n): one CompletionOutput each, by index
        self.outputs = [CompletionOutput(i) for i in range(sampling_params.n)]
        self._open = set(range(sampling_params.n))  # outputs not finished yet
        self.finished = False
        self._params = sampling_params
        self._streaming = streaming
        self._aborted = False
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()
        self.sink = _Sink(self)
        self._withdraw = withdraw

    def abort(self) -> None:
        """Row result.abort: the request is cancelled at the engine's next step (or at once
        while it still waits for a place in the batch)."""
        self._aborted = True
        if self._withdraw(self.sink):
            self.sink.fail("cancelled before it started", "CANCELLED")

    def _post(self, item) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    def __aiter__(self):
        return self

    async def __anext__(self) -> "RequestOutput":
        if self.finished:
            raise StopAsyncIteration
        for out in self.outputs:  # row result.diffs: the diffs are since the previous iteration
            out._last_token_ids_len, out._last_logprobs_len = len(out.token_ids), len(out.logprobs)
        while True:
            ids, lps, cum, final, failure, sequence, top = await self._queue.get()
            if failure is not None:
                if not (failure[0] == "CANCELLED" and self._aborted):
                    raise RuntimeError(f"request {self.request_id} failed: {failure[1]}")
                for index in sorted(self._open):
                    self._finish(self.outputs[index], cancelled=True)
                self._open.clear()
            else:
                self._take(self.outputs[sequence], ids, lps, cum, top)
                if final and sequence in self._open:
                    self._open.discard(sequence)
                    self._finish(self.outputs[sequence], cancelled=False)
            if not self._open:
                self.finished = True
                return self
            if self._streaming and ids:  # non-streaming: one output, at the end (row result.fields)
                return self

    def _take(self, out: CompletionOutput, ids, lps, cum, top=None) -> None:
        out.token_ids.extend(ids)
        if top is not None:  # logprobs = K > 1: exactly the top K, ranked (row result.logprobs.top_k)
            out.logprobs.extend({int(t): Logprob(float(lp), rank=r + 1) for r, (t, lp) in enumerate(zip(row_ids, row_lps))}
                                for row_ids, row_lps in zip(top.ids, top.log_probs))
        elif self._params.logprobs:  # K = 1: the sampled token (upstream: the most likely one; the same when greedy)
            out.logprobs.extend({t: Logprob(lp, rank=1)} for t, lp in zip(ids, lps))
        if cum is not None:
            out.cumulative_logprob = cum

    def _finish(self, out: CompletionOutput, cancelled: bool) -> None:
        params = self._params
        last = out.token_ids[-1] if out.token_ids else None
        if cancelled or self._aborted:
            out.finish_reason = "cancelled"
        elif params.stop_token_ids and last in params.stop_token_ids:
            out.finish_reason, out.stop_reason = "stop", last
        elif last is not None and last == params.end_id:
            out.finish_reason = "stop"
        else:
            out.finish_reason = "length"
