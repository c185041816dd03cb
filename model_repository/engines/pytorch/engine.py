"""The PyTorch-backend engine: one `tensorrt_llm.LLM` behind our engine contract.

One thread runs an asyncio loop that owns the LLM (NVIDIA's llmapi model does the same:
row triton.generate_call).  Triton's execute() thread hands requests in with `submit`
(refused at once beyond the queue bound) and `stop`; everything else happens on the loop:

- each request is one coroutine: `generate_async(ids, sampling_params=..., streaming=True)`
  (streaming by keyword: row triton.generate_call), consumed with `async for` (row
  result.fields); each step's new tokens of each sample (samples.py: read by position, not
  by the *_diff properties, which repeat with n > 1) go to the request's sink - at once when
  the client streams, all together at the end otherwise.  The engine always
  streams from the LLM: that is how it sees the first token (metrics, first-token timeout)
  and stop sequences of more than one token, which it ends itself with `abort()`;
- a poller looks every `cancel_period_s` for requests whose client went away (aborted,
  CANCELLED), and for requests without a first token after `queue_timeout_s` (aborted,
  UNAVAILABLE: retry later);
- `stop` aborts every running request with that Triton request id; each ends with a final
  response carrying the tokens not sent yet, as the CPU engine ends it (our contract;
  engine_step/loop_policies.py says what the three engine loops share of these and why the
  rest differs);
- another coroutine reads the LLM's iteration stats for the KV-cache usage gauge (kv_gauge.py:
  re-armed at every read, 0 while the LLM is idle), from the first request on: before it the
  executor has no stats and answers every get_stats_async with a printed warning (NVIDIA/
  TensorRT-LLM tensorrt_llm/executor/executor.py aget_stats at ed53795b, lines 325-329: "Iteration
  statistics are not available yet. ..."; not read at the v1.2.1 tag), so polling then says nothing
  and fills the log once a period.

Sends leave the loop through one outbox thread, in order, so a slow client never holds up
the loop.  Nothing here imports Triton or TensorRT-LLM.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from contract.model_configs import PyTorchEngineParameters
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engine_step.loop_policies import (
    FailCode,
    FirstTokenDeadline,
    is_stopped,
    polled_ending,
    stream_due,
)
from model_repository.engine_step.runner import HandleStatus, ResponseSink, RunnerObserver, ends_with_stop
from model_repository.engines.pytorch import outputs
from model_repository.engines.pytorch.kv_gauge import KvCacheGauge
from model_repository.engines.pytorch.outbox import Outbox
from model_repository.engines.pytorch.samples import Sample, SampleReader
from model_repository.engines.pytorch.sampling import guided_decoding_kwargs, multi_token_stops, sampling_kwargs

log = logging.getLogger(__name__)


@dataclass
class _Request:
    request: EngineInputs
    sink: ResponseSink
    request_id: str  # Triton's, the key of `stop`
    arrived: float
    key: int = -1
    output: Any = None  # the LLM's RequestOutput once submitted
    done: bool = False
    last_token_at: float = 0.0
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.samples = self.samples or [Sample() for _ in range(self.request.options.num_return_sequences)]

    @property
    def generated_count(self) -> int:
        return sum(len(s.generated) for s in self.samples)


@dataclass(frozen=True)
class EngineSettings:
    max_batch_size: int  # the LLM's running batch (for the running/waiting gauges)
    capacity: int | None  # requests in the engine beyond which new ones are refused
    queue_timeout_s: float | None  # no first token after this long: UNAVAILABLE
    # The model's parameters' defaults (contract/model_configs.py), which the model passes on.
    cancel_period_s: float = PyTorchEngineParameters.cancel_check_period_ms / 1000
    stats_period_s: float = PyTorchEngineParameters.stats_period_s


class LlmEngine:
    def __init__(
        self,
        make_llm: Callable[[], Any],
        sampling_params: Callable[..., Any],
        settings: EngineSettings,
        observer: RunnerObserver,
        clock: Callable[[], float] = time.monotonic,
        guided_params: Callable[..., Any] | None = None,
        lora_request: Callable[[int], Any] | None = None,
    ) -> None:
        self._make_llm = make_llm
        self._sampling_params = sampling_params  # the SamplingParams class
        self._guided_params = guided_params  # the GuidedDecodingParams class (an LLM with a guided decoder)
        self._lora_request = lora_request  # lora_task_id -> a LoRARequest (an LLM with LoRA adapters)
        self._settings = settings
        self._deadline = FirstTokenDeadline(settings.queue_timeout_s)
        self._observer = observer
        self._clock = clock
        self._lock = threading.Lock()
        self._active: dict[int, _Request] = {}
        self._keys = itertools.count()
        self._stopping = False
        self._outbox = Outbox()
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._llm: Any = None
        self._gauge = KvCacheGauge(settings.stats_period_s, idle=lambda: not self._snapshot())
        self._submitted = False  # a request reached the LLM: its iteration stats exist

    @property
    def kv_cache_usage(self) -> float:
        return self._gauge.usage

    # --- Triton's thread ------------------------------------------------------------------
    def start(self, timeout_s: float | None = None) -> None:
        """Build the LLM on the loop's thread and start serving; raises what the LLM raised."""
        started: dict[str, Any] = {}
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(started, ready), name="pytorch-engine-loop", daemon=True
        )
        self._thread.start()
        ready.wait(timeout_s)
        if "error" in started:
            self._thread.join()
            self._outbox.close()
            raise started["error"]

    def submit(self, request: EngineInputs, sink: ResponseSink, request_id: str = "") -> None:
        with self._lock:
            if self._stopping:
                sink.fail("the engine is shutting down", FailCode.UNAVAILABLE)
                return
            load = len(self._active)
            if self._settings.capacity is not None and load >= self._settings.capacity:
                sink.fail(f"the engine is full ({load} requests running or queued); retry later", FailCode.UNAVAILABLE)
                return
            r = _Request(request, sink, request_id, self._clock(), next(self._keys))
            r.last_token_at = r.arrived
            self._active[r.key] = r
        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(self._serve(r)))

    def stop(self, request_id: str) -> None:
        """Abort every request with this Triton request id (TensorRT-LLM's `stop`)."""
        self._loop.call_soon_threadsafe(self._stop_id, request_id)

    def counts(self) -> tuple[int, int]:
        """(running, waiting): the LLM runs up to max_batch_size requests at once."""
        with self._lock:
            active = len(self._active)
        running = min(active, self._settings.max_batch_size)
        return running, active - running

    def shutdown(self, timeout_s: float = 30.0) -> None:
        with self._lock:
            self._stopping = True
        if self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout_s)
        self._outbox.close()

    # --- the loop's thread ----------------------------------------------------------------
    def _run(self, started: dict, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._llm = self._make_llm()
        except Exception as e:
            started["error"] = e
            ready.set()
            return
        ready.set()
        self._loop.create_task(self._poll_cancelled())
        self._loop.create_task(self._read_stats())
        try:
            self._loop.run_forever()
        finally:
            for r in self._take_all():
                self._abort(r)
                self._outbox.post(r.sink.fail, "the engine is shutting down", FailCode.UNAVAILABLE)
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            try:
                self._llm.shutdown()  # row llm.shutdown
            except Exception:
                log.exception("LLM.shutdown() failed")

    async def _serve(self, r: _Request) -> None:
        if r.done:  # cancelled before its turn on the loop
            return
        try:
            kwargs = sampling_kwargs(r.request)
            guide = guided_decoding_kwargs(r.request)
            if guide is not None:
                if self._guided_params is None:
                    raise ValueError("this LLM has no guided decoding backend")
                kwargs["guided_decoding"] = self._guided_params(**guide)
            task = r.request.options.lora_task_id  # 0: the base model
            adapter = {}
            if task:
                if self._lora_request is None:
                    raise ValueError("this LLM serves no LoRA adapters")
                adapter = {"lora_request": self._lora_request(task)}
            params = self._sampling_params(**kwargs)
            r.output = self._llm.generate_async(
                list(r.request.input_ids), sampling_params=params, streaming=True, **adapter
            )
            self._submitted = True
        except Exception as e:  # refused before it ran (e.g. rows llm.max_num_tokens_check, llm.shutting_down)
            self._end(r, HandleStatus.IGNORED, f"the engine refused the request: {e}", FailCode.INTERNAL)
            return
        self._observer.on_scheduled(self._clock() - r.arrived)
        # Multi-token stops end the request here only with one sample (the LLM ends a request,
        # not one of its samples); with n, postprocessing cuts each sample's text.
        stops = multi_token_stops(r.request) if len(r.samples) == 1 else ()
        k = r.request.options.top_logprobs  # alternatives per token (0: none asked)
        reader = SampleReader(len(r.samples), getattr(params, "best_of", None), kwargs.get("stop_token_ids") or ())
        try:
            async for step in r.output:
                if r.done:
                    break
                stopped = False
                for sample, new in zip(r.samples, reader.read(step.outputs, step.finished)):
                    ids, lps, tops = outputs.read_tokens(new.ids, new.entries, k)
                    stopped = self._take_tokens(r, sample, ids, lps, stops, tops) or stopped
                if stopped:
                    self._abort(r)  # a stop sequence of several tokens completed
                    self._finish(r, HandleStatus.STOPPED)
                    break
                if step.finished:
                    self._finish(r, HandleStatus.FINISHED, closing=True)
                    break
                self._stream(r)
        except Exception as e:
            if not r.done:
                log.exception("generation failed")
                self._end(r, HandleStatus.IGNORED, f"the engine failed the request: {e}", FailCode.INTERNAL)
        if not r.done:  # the outputs ended without a finished one: end the request all the same
            self._finish(r, HandleStatus.FINISHED, closing=True)

    def _take_tokens(
        self,
        r: _Request,
        sample: Sample,
        ids: list[int],
        lps: list[float],
        stops,
        tops: Sequence[tuple[list[int], list[float]]] = (),
    ) -> bool:
        """Record a step's tokens of one sample (and their alternatives, `tops`, when
        top_logprobs asked for them); True when one completes a multi-token stop sequence."""
        if not ids:
            return False
        now = self._clock()
        self._observer.on_tokens(not r.generated_count, now - r.last_token_at, len(ids))
        r.last_token_at = now
        for i, (token, lp) in enumerate(zip(ids, lps)):
            sample.generated.append(token)
            sample.log_probs.append(lp)
            sample.cum_log_prob += lp
            if tops:
                sample.top_ids.append(tops[i][0])
                sample.top_log_probs.append(tops[i][1])
            if stops and len(sample.generated) >= r.request.min_tokens and ends_with_stop(sample.generated, stops):
                return True
        return False

    def _stream(self, r: _Request) -> None:
        if r.request.streaming:
            for index, sample in enumerate(r.samples):
                if stream_due(len(sample.generated) - sample.sent, sample.sent, 1):  # at the LLM's cadence
                    self._send(r, index, final=False)

    def _send(self, r: _Request, index: int, final: bool) -> None:
        sample = r.samples[index]
        self._outbox.post(
            r.sink.send,
            sample.generated[sample.sent :],
            sample.log_probs[sample.sent :],
            sample.cum_log_prob,
            final,
            index,
            sample.top(r.request.options.top_logprobs),
        )
        sample.sent = len(sample.generated)

    def _finish(self, r: _Request, status: HandleStatus, closing: bool = False) -> None:
        """A final response per sample with what was not sent yet (everything, when not
        streaming).  `closing`: a streamed sample whose tokens do not show that it ended gets
        them in a response of its own, then a final response without tokens - the end
        postprocessing reads (model_repository/engines/relay/bls_pipeline.py closing_response)."""
        if self._release(r):
            for index, sample in enumerate(r.samples):
                if (
                    closing
                    and r.request.streaming
                    and len(sample.generated) > sample.sent
                    and not self._visible_end(r, sample)
                ):
                    self._send(r, index, final=False)
                self._send(r, index, final=True)
            self._observer.on_finished(r.request, r.generated_count, status)

    @staticmethod
    def _visible_end(r: _Request, sample: Sample) -> bool:
        """Whether the tokens themselves say the sample ended: the end id, or max_tokens.
        TensorRT-LLM's executor leaves the end id and stop tokens out of the output (the C++
        backend does: upstream row output.end_id_not_in_output), so the LLM may not show it."""
        return bool(sample.generated) and (
            sample.generated[-1] == r.request.end_id or len(sample.generated) >= r.request.request_output_len
        )

    def _end(self, r: _Request, status: HandleStatus, message: str, code: FailCode) -> None:
        if self._release(r):
            self._outbox.post(r.sink.fail, message, code)
            self._observer.on_finished(r.request, r.generated_count, status)

    def _release(self, r: _Request) -> bool:
        """Mark r done and forget it; False if it already was."""
        if r.done:
            return False
        r.done = True
        with self._lock:
            self._active.pop(r.key, None)
        return True

    def _abort(self, r: _Request) -> None:
        if r.output is not None:
            try:
                r.output.abort()  # row result.abort
            except Exception:
                log.exception("abort() failed")

    def _stop_id(self, request_id: str) -> None:
        stops = {request_id}
        for r in self._snapshot():
            if is_stopped(r.request_id, stops):
                self._abort(r)
                self._finish(r, HandleStatus.CANCELLED)

    async def _poll_cancelled(self) -> None:
        while True:
            await asyncio.sleep(self._settings.cancel_period_s)
            now = self._clock()
            for r in self._snapshot():
                ending = polled_ending(r.sink.is_cancelled(), bool(r.generated_count), r.arrived, now, self._deadline)
                if ending is not None:
                    self._abort(r)
                    self._end(r, HandleStatus.CANCELLED, *ending)

    async def _read_stats(self) -> None:
        """The KV-cache usage from the LLM's iteration stats (row llm.get_stats_async; kv_gauge.py),
        not asked for before the first request (the gauge reads 0 until then)."""
        while True:
            await asyncio.sleep(self._settings.stats_period_s)
            if self._submitted:
                await self._gauge.read(self._llm)

    def _snapshot(self) -> list[_Request]:
        with self._lock:
            return list(self._active.values())

    def _take_all(self) -> list[_Request]:
        with self._lock:
            taken, self._active = list(self._active.values()), {}
        for r in taken:
            r.done = True
        return taken
