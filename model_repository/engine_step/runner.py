"""The CPU engine's step loop: in-flight batching over a generation backend.

Requests are submitted from Triton's `execute()` thread and join the running batch at the
next step; one background thread alternates `backend.step()` (the library advances every
running sequence by one token, prefilling new prompts in chunks) with handing each
request's new tokens to its sink.  The thread sleeps on a condition when there is no work:
no busy waiting.  Its cancellation, `stop` and stream cadence policies: loop_policies.py.
Nothing here imports Triton or OpenVINO: tests drive it with fakes.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import AbstractSet, Protocol, Sequence

from model_repository.engine_step.admission import DEFAULT_AGING_PER_S, DEFAULT_PRIORITY, AgingQueue
from model_repository.engine_step.alternatives import AlternativesSink, Scorer, TopLogprobs
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engine_step.loop_policies import (
    FailCode,
    FirstTokenDeadline,
    is_stopped,
    polled_ending,
    stream_due,
)
from model_repository.engine_step.periodic import Periodic
from model_repository.engine_step.sequences import SampleState, SequenceView, read_sequences

log = logging.getLogger(__name__)


def _interactive(priority: float) -> bool:
    return priority >= DEFAULT_PRIORITY


class HandleStatus(enum.Enum):
    RUNNING = "running"
    FINISHED = "finished"  # end id, stop token or length
    STOPPED = "stopped"  # we stopped it (stop word)
    CANCELLED = "cancelled"
    IGNORED = "ignored"  # the backend could not schedule it


class Handle(Protocol):
    def read(self) -> tuple[list[int], list[float]]: ...  # new ids and their log probs

    # Backends that sample several sequences per request (num_return_sequences) also have
    # read_sequences() -> {sequence index: (new ids, their log probs)}; see sequences.py.

    def status(self) -> HandleStatus: ...

    def stop(self) -> None: ...

    def cancel(self) -> None: ...


class GenerationBackend(Protocol):
    # Whether guided decoding constrains every one of a request's num_return_sequences (False:
    # the runner samples n guided sequences as n requests; see EngineRunner.submit).
    guides_every_sequence: bool

    # Scores requests that ask for top_logprobs (alternatives.Scorer); None: the engine has none.
    scorer: Scorer | None

    def add(self, request_id: int, request: EngineInputs) -> Handle: ...

    def step(self) -> None: ...

    def has_unfinished(self) -> bool: ...

    def stats(self) -> dict[str, float]: ...


class ResponseSink(Protocol):
    def is_cancelled(self) -> bool: ...

    def send(
        self,
        ids: Sequence[int],
        log_probs: Sequence[float],
        cum_log_prob: float,
        final: bool,
        sequence: int = 0,
        top: TopLogprobs | None = None,
    ) -> None: ...

    # `sequence`: which of num_return_sequences; `top`: the alternatives of ids (top_logprobs)

    def fail(self, message: str, code: FailCode = FailCode.INTERNAL) -> None: ...  # error + final


class RunnerObserver(Protocol):
    """Timing hooks for metrics (time to first token, inter-token latency, queue time)."""

    def on_scheduled(self, queue_s: float) -> None: ...

    def on_tokens(self, first: bool, latency_s: float, count: int) -> None: ...

    def on_finished(self, request: EngineInputs, generated: int, reason: HandleStatus) -> None: ...


class _NoObserver:
    def on_scheduled(self, queue_s: float) -> None: ...

    def on_tokens(self, first: bool, latency_s: float, count: int) -> None: ...

    def on_finished(self, request: EngineInputs, generated: int, reason: HandleStatus) -> None: ...


@dataclass
class _Active:
    request: EngineInputs
    sink: ResponseSink
    handle: Handle
    arrived: float
    request_id: str = ""  # Triton's request id, the key of `stop` requests
    last_token_at: float = 0.0
    sequences: list[SampleState] = field(default_factory=list)
    multi_token_stops: tuple[tuple[int, ...], ...] = ()

    @property
    def generated(self) -> list[int]:  # the first sequence's (the only one unless n > 1)
        return self.sequences[0].generated

    @property
    def total_generated(self) -> int:
        return sum(len(s.generated) for s in self.sequences)

    def send_all(self, final: bool) -> None:
        for index, seq in enumerate(self.sequences):
            seq.send_pending(self.sink, index, final)


def multi_token_stops(request: EngineInputs) -> tuple[tuple[int, ...], ...]:
    """Stop sequences the backend does not handle natively (single tokens it does)."""
    return tuple(w for w in request.stop_words_list if len(w) > 1)


def ends_with_stop(generated: Sequence[int], stops: tuple[tuple[int, ...], ...]) -> bool:
    return any(len(generated) >= len(s) and tuple(generated[-len(s) :]) == s for s in stops)


class EngineRunner:
    def __init__(
        self,
        backend: GenerationBackend,
        observer: RunnerObserver | None = None,
        clock=time.monotonic,
        *,
        capacity: int | None = None,
        queue_timeout_s: float | None = None,
        stream_interval: int = 1,
        max_running: int | None = None,
        aging_per_s: float = DEFAULT_AGING_PER_S,
        reserved_from_low_priority: int = 0,
        cancellation_check_period_s: float = 0.0,
    ) -> None:
        """`capacity`: requests in the engine (running + waiting) beyond which new ones are
        refused at once; `queue_timeout_s`: a request without its first token after this
        long is failed instead of waiting on.  `cancellation_check_period_s`: 0 asks every
        sink whether its client cancelled at every step, on the step thread; above 0 a thread
        asks every live sink once per period and the step thread reads its answers, as
        TensorRT-LLM's backend does (its WaitForCancel thread: row cancel.poll).  Triton's
        Python backend answers `is_cancelled()` with a round trip to the server, so at every
        step the engine waited on one per running request (10% of the step thread at 16
        streams, measured)."""
        self._backend = backend
        self._capacity = capacity
        self._deadline = FirstTokenDeadline(queue_timeout_s)
        self._max_running = max_running  # None: every request goes straight to the engine (FIFO)
        # Seats of max_running that requests below the default priority never take, so a
        # request at or above it finds one free without waiting for a long low one to end.
        self._reserved = reserved_from_low_priority if max_running is not None else 0
        self._waiting: AgingQueue[tuple[EngineInputs, ResponseSink, float, str]] = AgingQueue(aging_per_s)
        self._stream_interval = stream_interval  # tokens per streamed response; 0: by batch size
        self._observer = observer or _NoObserver()
        self._clock = clock
        self._cond = threading.Condition()
        self._incoming: list[tuple[EngineInputs, ResponseSink, float, str]] = []
        self._stops: set[str] = set()
        self._active: dict[int, _Active] = {}
        self._next_id = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._canceller = (
            Periodic(cancellation_check_period_s, self.poll_cancelled, "cpu-engine-cancel")
            if cancellation_check_period_s > 0
            else None
        )
        self._live_sinks: tuple[ResponseSink, ...] = ()  # published by the step thread for the canceller
        self._cancelled_sinks: frozenset[ResponseSink] = frozenset()  # the canceller's last answer
        self.steps = 0
        self.backend_stats: dict[str, float] = {}  # refreshed on the step thread
        self._stats_due = 0.0

    # --- called from Triton's thread ------------------------------------------------------
    def submit(self, request: EngineInputs, sink: ResponseSink, request_id: str = "") -> None:
        n = request.options.num_return_sequences
        if (
            n > 1
            and request.options.guided_decoding_guide_type
            and not getattr(self._backend, "guides_every_sequence", True)
        ):
            # n guided samples as n one-sequence requests (seeds seed, seed+1, ...): same
            # seed, same n answers; each answers as its sequence_index.
            one = dataclasses.replace(request.options, num_return_sequences=1)
            for index in range(n):
                part = dataclasses.replace(request, options=one, seed=(request.seed + index) % 2**64)
                self.submit(part, SequenceView(sink, index), request_id)
            return
        with self._cond:
            if self._stopping:
                sink.fail("the engine is shutting down", FailCode.UNAVAILABLE)
                return
            load = len(self._active) + len(self._incoming) + len(self._waiting)
            if self._capacity is not None and load >= self._capacity:
                sink.fail(f"the engine is full ({load} requests running or queued); retry later", FailCode.UNAVAILABLE)
                return
            self._incoming.append((request, sink, self._clock(), request_id))
            self._cond.notify()

    def stop(self, request_id: str) -> None:
        """Cancel every request with this Triton request id (TensorRT-LLM's `stop`)."""
        with self._cond:
            self._stops.add(request_id)
            self._cond.notify()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="cpu-engine-steps", daemon=True)
        self._thread.start()
        if self._canceller is not None:
            self._canceller.start()

    def poll_cancelled(self) -> int:
        """The canceller's period: ask every running and waiting request's sink whether its
        client cancelled (off the step thread); the next step drops those."""
        self._cancelled_sinks = frozenset(sink for sink in self._live_sinks if sink.is_cancelled())
        return len(self._cancelled_sinks)  # the step loop runs while any of them is live: no wake-up

    def _is_cancelled(self, sink: ResponseSink) -> bool:
        return sink.is_cancelled() if self._canceller is None else sink in self._cancelled_sinks

    def shutdown(self, timeout_s: float = 10.0) -> None:
        if self._canceller is not None:
            self._canceller.stop()
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout_s)
        for _, sink, _, _ in self._incoming:
            sink.fail("the engine is shutting down", FailCode.UNAVAILABLE)
        self._incoming.clear()

    def counts(self) -> tuple[int, int]:
        """(running, waiting) requests."""
        with self._cond:
            return len(self._active), len(self._incoming) + len(self._waiting)

    # --- the step thread --------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                while (
                    not self._incoming
                    and not self._active
                    and not len(self._waiting)
                    and not self._stops
                    and not self._stopping
                ):
                    self._cond.wait()
                if self._stopping:
                    break
                incoming, self._incoming = self._incoming, []
                stops, self._stops = self._stops, set()
            try:
                self.run_once(incoming, stops)
            except Exception as e:  # a broken step must not kill the thread silently
                log.exception("engine step failed")
                self._fail_all(f"engine step failed: {e}")
                recover = getattr(self._backend, "recover", None)
                if recover is not None:  # a backend whose failed step leaves it unusable starts afresh
                    recover()
        self._fail_all("the engine is shutting down")

    def run_once(
        self, incoming: list[tuple[EngineInputs, ResponseSink, float, str]], stops: AbstractSet[str] = frozenset()
    ) -> None:
        """Drop cancelled requests (running, then waiting), admit waiting ones by priority, advance
        the batch one step, deliver tokens."""
        for request in incoming:
            self._waiting.push(request, request[2], request[0].options.priority)
        self._drop_cancelled(stops)  # first: the seats it frees go to waiting requests in this step
        self._drop_cancelled_waiting(stops)
        now = self._clock()
        while len(self._waiting):
            free = self._max_running - len(self._active) if self._max_running is not None else len(self._waiting)
            if free <= 0:
                break
            # Seats beyond the reserve go to anyone; the reserved ones to interactive requests only.
            entry = self._waiting.pop(now, None if free > self._reserved else _interactive)
            if entry is None:
                break
            self._admit(*entry)
        if self._backend.has_unfinished():
            self._backend.step()
            self.steps += 1
        self._deliver()
        if self._canceller is not None:
            self._live_sinks = tuple(a.sink for a in self._active.values()) + tuple(e[1] for e in self._waiting.items())
        now = self._clock()
        if now >= self._stats_due or not self._active:  # read on this thread only
            self.backend_stats = self._backend.stats()
            self._stats_due = now + 0.2

    def _admit(self, request: EngineInputs, sink: ResponseSink, arrived: float, request_id: str) -> None:
        """Cancelled requests were dropped by _drop_cancelled_waiting in the same run_once."""
        on_scheduled = getattr(sink, "on_scheduled", None)  # a traced sink's queue time (triton/tracing.py)
        if request.options.top_logprobs:
            scorer = getattr(self._backend, "scorer", None)
            if scorer is None:
                sink.fail("'top_logprobs': this engine computes no alternatives")
                return
            sink = AlternativesSink(sink, scorer, request.input_ids, request.options.top_logprobs)
        key = self._next_id
        self._next_id += 1
        try:
            handle = self._backend.add(key, request)
        except Exception as e:
            sink.fail(f"the engine rejected the request: {e}")
            return
        now = self._clock()
        self._observer.on_scheduled(now - arrived)
        if on_scheduled is not None:
            on_scheduled(now - arrived)
        n = request.options.num_return_sequences
        # Multi-token stops end the request in the engine only with one sequence (OpenVINO
        # stops a request, not one of its sequences); with n, postprocessing cuts each text.
        self._active[key] = _Active(
            request,
            sink,
            handle,
            arrived,
            request_id,
            last_token_at=arrived,
            sequences=[SampleState() for _ in range(n)],
            multi_token_stops=multi_token_stops(request) if n == 1 else (),
        )

    def _drop_cancelled_waiting(self, stops: AbstractSet[str]) -> None:
        """Requests still waiting for admission: stopped (an empty final per sequence, as a
        cancelled request ends in the engine), cancelled by the client, or past the queue timeout
        (which wins over a cancellation here: loop_policies.py)."""
        now = self._clock()
        for request, sink, arrived, request_id in self._waiting.remove_if(
            lambda e: is_stopped(e[3], stops) or self._is_cancelled(e[1]) or self._deadline.overdue(e[2], now)
        ):
            if is_stopped(request_id, stops):
                for index in range(request.options.num_return_sequences):
                    sink.send([], [], 0.0, True, index)
            elif self._deadline.overdue(arrived, now):
                sink.fail(self._deadline.message(arrived, now), FailCode.UNAVAILABLE)
            else:  # its client cancelled (asked once: each ask is a round trip to the server)
                sink.fail("cancelled before it started", FailCode.CANCELLED)

    def _drop_cancelled(self, stops: AbstractSet[str]) -> None:
        now = self._clock()
        for key, a in list(self._active.items()):
            if is_stopped(a.request_id, stops):
                # As TensorRT-LLM's executor ends a cancelled request: a final response with the
                # tokens not sent yet (all of them when not streaming), not an error (backend
                # semantics row cancel.final_result; in Triton 2.51 an error final after data
                # never reaches a BLS caller).
                a.handle.cancel()
                del self._active[key]
                stopped = getattr(a.sink, "on_stopped", None)  # a traced sink marks its span (triton/tracing.py)
                if stopped is not None:
                    stopped()
                a.send_all(final=True)
                self._observer.on_finished(a.request, a.total_generated, HandleStatus.CANCELLED)
                continue
            ending = polled_ending(self._is_cancelled(a.sink), bool(a.generated), a.arrived, now, self._deadline)
            if ending is None:
                continue
            a.handle.cancel()
            del self._active[key]
            a.sink.fail(*ending)
            self._observer.on_finished(a.request, a.total_generated, HandleStatus.CANCELLED)

    def _deliver(self) -> None:
        now = self._clock()
        interval = self.stream_interval(len(self._active))
        for key, a in list(self._active.items()):
            new = read_sequences(a.handle, len(a.sequences))
            status = a.handle.status()
            count = sum(len(ids) for ids, _ in new.values())
            if count:
                self._observer.on_tokens(not a.total_generated, now - a.last_token_at, count)
                a.last_token_at = now
            for index, (ids, lps) in new.items():
                a.sequences[index].take(ids, lps)
            if (
                count
                and status == HandleStatus.RUNNING
                and a.multi_token_stops
                and self._hit_stop(a, len(new.get(0, ((), ()))[0]))
            ):
                a.handle.stop()
                status = HandleStatus.STOPPED
            if status == HandleStatus.IGNORED:
                del self._active[key]
                a.sink.fail(
                    "the engine could not schedule the request (it does not fit the KV cache)", FailCode.UNAVAILABLE
                )
                continue
            final = status != HandleStatus.RUNNING
            for index, seq in enumerate(a.sequences):
                if final or (a.request.streaming and stream_due(len(seq.generated) - seq.sent, seq.sent, interval)):
                    seq.send_pending(a.sink, index, final)
            if final:
                del self._active[key]
                self._observer.on_finished(a.request, a.total_generated, status)

    @staticmethod
    def _hit_stop(a: _Active, new: int) -> bool:
        """A multi-token stop ended within the `new` tokens just read (one sequence): the
        tokens after it are dropped, as the engine would never have made them."""
        seq = a.sequences[0]
        start = len(seq.generated) - new
        for end in range(start + 1, len(seq.generated) + 1):
            if end >= a.request.min_tokens and ends_with_stop(seq.generated[:end], a.multi_token_stops):
                del seq.generated[end:]
                seq.cum_log_prob -= sum(seq.log_probs[end:])
                del seq.log_probs[end:]
                return True
        return False

    def stream_interval(self, running: int) -> int:
        """Tokens per streamed response (the first token always goes out alone, at once).
        Every response costs a trip through Triton, postprocessing and the network; with
        many requests in the batch those trips take CPU from the engine itself."""
        if self._stream_interval > 0:
            return self._stream_interval
        return 1 if running <= 4 else 2 if running <= 8 else 4

    def _fail_all(self, message: str) -> None:
        for _, sink, _, _ in self._waiting.drain():
            sink.fail(message)
        for a in list(self._active.values()):
            try:
                a.handle.cancel()
            finally:
                a.sink.fail(message)
        self._active.clear()
