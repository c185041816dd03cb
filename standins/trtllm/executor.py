"""The stand-in's TensorRT-LLM executor: a bounded queue in front of the CPU engine, requests
fetched into the engine while fewer than max_batch_size are active, validated when fetched,
cancelled by id, and each request's results handed to its target.

Rows: error.queue_full (the bound counts only queued requests), request_id.executor_id_sequence,
limit.max_active_requests, limit.beam_width_operating, error.beam_width_exceeds_max,
error.end_id_range, error.prompt_too_long, limit.output_len_clamped, error.streaming_evictable,
cancel.executor, cancel.queued_request, cancel.final_result, request_id.map / cleanup,
stop.lookup, cancel.poll.  Nothing here imports Triton or OpenVINO: tests drive it with fakes.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from contract.upstream.backend_semantics import BackendSemantics
from model_repository.engine_step.runner import FailCode
from model_repository.engine_step.engine_inputs import EngineInputs
from standins.trtllm.registry import TritonIdRegistry
from standins.trtllm.request import ExecutorRequest
from standins.trtllm.results import Result, RowState
from standins.trtllm.upstream import StandinLimitation, UpstreamError, error, executor_failure, fetch_failure

log = logging.getLogger(__name__)
OPERATING_BEAM_WIDTH = 1  # the CPU engine runs no beam search (settings refuse max_beam_width > 1)


class ResultTarget(Protocol):
    """The response side of one Triton request (all its rows)."""

    def bind(self, executor_ids: list[int], requests: list[ExecutorRequest]) -> None: ...  # before any result

    def result(self, executor_id: int, result: Result) -> None: ...

    def failed(self, executor_id: int, err: UpstreamError | StandinLimitation) -> None: ...  # final

    def is_cancelled(self) -> bool: ...


class Engine(Protocol):
    """EngineRunner, as far as the executor uses it."""

    def submit(self, request: EngineInputs, sink, request_id: str = "") -> None: ...

    def stop(self, request_id: str) -> None: ...


@dataclass(frozen=True)
class ExecutorLimits:
    max_active: int  # limit.max_active_requests: max_batch_size
    max_queue_size: int  # 0: unbounded
    max_input_len: int  # limit.max_input_len
    max_seq_len: int
    vocab_size_padded: int
    max_beam_width: int
    guard_streaming: bool  # error.streaming_evictable applies: max_utilization without chunked context
    # The LoRA cache's tasks: upstream task id -> the CPU engine's adapter (lora_cache.py)
    lora_tasks: Mapping[int, int] = dataclasses.field(default_factory=dict)
    max_draft_len: int = 0  # the engine's (0: built without speculative decoding)


@dataclass(frozen=True)
class ExecutorStats:
    active: int
    queued: int
    max_active: int


@dataclass
class _Entry:
    executor_id: int
    request: ExecutorRequest
    target: ResultTarget
    triton_id: str
    states: dict[int, RowState] | None = None  # per sequence, while active
    open_sequences: set[int] | None = None  # sequences without their last result yet

    @property
    def sequences(self) -> int:
        return self.request.inputs.options.num_return_sequences


class _RowSink:
    """The runner's ResponseSink for one executor request.  Cancellation never comes through
    here (is_cancelled is False): the executor stops requests by id, as upstream's does."""

    def __init__(self, executor: "StandinExecutor", executor_id: int) -> None:
        self._executor, self._id = executor, executor_id

    def is_cancelled(self) -> bool:
        return False

    def send(self, ids: Sequence[int], log_probs: Sequence[float], cum_log_prob: float, final: bool,
             sequence: int = 0, top=None) -> None:  # `top`: never asked (the C++ backend has no top_logprobs)
        self._executor._on_tokens(self._id, ids, log_probs, cum_log_prob, final, sequence)

    def fail(self, message: str, code: FailCode = FailCode.INTERNAL) -> None:
        self._executor._on_engine_error(self._id, message)


class StandinExecutor:
    def __init__(self, sem: BackendSemantics, engine: Engine, limits: ExecutorLimits) -> None:
        self._sem = sem
        self._engine = engine
        self.limits = limits
        self._lock = threading.Lock()
        self._queue: OrderedDict[int, _Entry] = OrderedDict()
        self._active: dict[int, _Entry] = {}
        self._cancelled: set[int] = set()  # queued requests cancelled (cancel.queued_request)
        self._next_id = sem.rule("request_id.executor_id_sequence").extra["first_id"]
        self.registry = TritonIdRegistry()

    # --- Triton's thread ---------------------------------------------------------------------
    def enqueue(self, requests: list[ExecutorRequest], target: ResultTarget, triton_id: str = "") -> list[int]:
        """Queue the rows of one Triton request; raises error.queue_full (nothing queued then)."""
        with self._lock:
            bound = self.limits.max_queue_size
            queued = sum(e.sequences for e in self._queue.values())
            if bound > 0 and queued + sum(r.inputs.options.num_return_sequences for r in requests) > bound:
                raise error(self._sem, "error.queue_full", max_queue_size=bound)  # children counted
            ids = []
            for request in requests:
                ids.append(self._next_id)
                self._queue[self._next_id] = _Entry(self._next_id, request, target, triton_id)
                # request_id.executor_ids: the children of num_return_sequences > 1 take the next ids
                self._next_id += request.inputs.options.num_return_sequences
            target.bind(ids, requests)
            self.registry.register(triton_id, ids)  # request_id.map, right after the enqueue
            actions = self._fetch_locked()
        self._run(actions)
        return ids

    def stop(self, triton_id: str) -> None:
        """Row stop.lookup: cancel every executor request registered under this id."""
        with self._lock:
            ids = self.registry.lookup(triton_id)
        for executor_id in ids:
            self.cancel(executor_id)

    def cancel(self, executor_id: int) -> None:
        """Row cancel.executor: a terminated id is ignored; an active one is stopped at the
        engine's next step; a queued one waits to be fetched (cancel.queued_request)."""
        with self._lock:
            active = executor_id in self._active
            if not active and executor_id in self._queue:
                self._cancelled.add(executor_id)
        if active:
            self._engine.stop(str(executor_id))

    def poll_cancelled(self) -> int:
        """Row cancel.poll: cancel every request whose Triton request was cancelled."""
        with self._lock:
            entries = list(self._queue.values()) + list(self._active.values())
        cancelled = [e.executor_id for e in entries if e.target.is_cancelled()]
        for executor_id in cancelled:
            self.cancel(executor_id)
        return len(cancelled)

    def stats(self) -> ExecutorStats:
        with self._lock:
            return ExecutorStats(len(self._active), len(self._queue), self.limits.max_active)

    def shutdown(self) -> None:
        with self._lock:
            queued, self._queue = list(self._queue.values()), OrderedDict()
        for entry in queued:
            entry.target.failed(entry.executor_id, StandinLimitation("the model is being unloaded"))

    # --- the engine's step thread -------------------------------------------------------------
    def _on_tokens(self, executor_id: int, ids, log_probs, cum_log_prob: float, final: bool, sequence: int) -> None:
        """Row output.sequence_results: each sequence answers with its index; the request's
        isFinal goes only with the last sequence's last result."""
        with self._lock:
            entry = self._active.get(executor_id)
            if entry is None or sequence not in entry.open_sequences:
                return
            result = entry.states[sequence].add(ids, log_probs, cum_log_prob, final)
            if final:
                entry.open_sequences.discard(sequence)
            done = not entry.open_sequences
            result = dataclasses.replace(result, final=done, sequence_index=sequence, num_sequences=entry.sequences)
            actions = self._finish_locked(entry) if done else []
        entry.target.result(executor_id, result)
        self._run(actions)

    def _on_engine_error(self, executor_id: int, message: str) -> None:
        with self._lock:
            entry = self._active.get(executor_id)
            if entry is None:
                return
            actions = self._finish_locked(entry)
        entry.target.failed(executor_id, executor_failure(self._sem, executor_id, message))
        self._run(actions)

    # --- admission (under the lock; actions run after it) --------------------------------------
    def _finish_locked(self, entry: _Entry) -> list:
        del self._active[entry.executor_id]
        self.registry.finished(entry.triton_id, entry.executor_id)  # request_id.cleanup
        return self._fetch_locked()

    def _fetch_locked(self) -> list:
        """Rows limit.max_active_requests and limit.beam_width_operating: fetch in queue order
        while there is room; a head of another beam width waits until nothing is active, then
        fails (error.beam_width_exceeds_max)."""
        actions: list = []
        while self._queue and len(self._active) < self.limits.max_active:
            head = next(iter(self._queue.values()))
            started = any(a[0] == "start" for a in actions)
            if head.request.beam_width != OPERATING_BEAM_WIDTH and (self._active or started):
                break
            del self._queue[head.executor_id]
            problem = self._refusal(head)
            if problem is not None:
                self._cancelled.discard(head.executor_id)
                self.registry.finished(head.triton_id, head.executor_id)
                actions.append(("fail", head, problem))
                continue
            head.request = self._on_adapter(self._clamped(head.request))
            head.states = {i: RowState(head.request.inputs.input_ids, head.request.inputs.streaming,
                                       head.request.exclude_input_in_output, head.request.end_id,
                                       head.request.inputs.return_log_probs) for i in range(head.sequences)}
            head.open_sequences = set(head.states)
            self._active[head.executor_id] = head
            actions.append(("start", head, head.executor_id in self._cancelled))
            self._cancelled.discard(head.executor_id)
        return actions

    def _refusal(self, entry: _Entry) -> UpstreamError | StandinLimitation | None:
        """LlmRequest::validate and fetchNewRequests' checks, in upstream's order."""
        sem, limits, eid, r = self._sem, self.limits, entry.executor_id, entry.request
        if r.beam_width != OPERATING_BEAM_WIDTH:
            return fetch_failure(sem, eid, "error.beam_width_exceeds_max", beam_width=r.beam_width,
                                 max_beam_width=limits.max_beam_width)
        if r.end_id is not None and not -1 <= r.end_id < limits.vocab_size_padded:
            return fetch_failure(sem, eid, "error.end_id_range", end_id=r.end_id, vocab_size_padded=limits.vocab_size_padded)
        prompt = len(r.inputs.input_ids)
        if prompt > limits.max_input_len:
            return fetch_failure(sem, eid, "error.prompt_too_long", prompt_len=prompt, max_input_len=limits.max_input_len)
        if r.draft_len > limits.max_draft_len:
            return fetch_failure(sem, eid, "error.draft_tokens_too_long", draft_len=r.draft_len,
                                 max_draft_len=limits.max_draft_len)
        max_new = min(r.inputs.request_output_len, self._room(r))  # limit.output_len_clamped
        if r.inputs.streaming and limits.guard_streaming and prompt + max_new - 1 > limits.max_input_len:
            return fetch_failure(sem, eid, "error.streaming_evictable")
        if r.lora_error:  # loraValidateRequestTensorDims runs before the cache lookup
            return fetch_failure(sem, eid, r.lora_error)
        if r.lora_task_id is not None and r.lora_task_id not in limits.lora_tasks:
            return fetch_failure(sem, eid, "error.lora_not_cached", task_id=r.lora_task_id)
        if any(not 0 <= t < limits.vocab_size_padded for t in r.inputs.input_ids):
            # Out-of-vocabulary prompt ids would break the CPU engine's step for every request.
            return StandinLimitation(f"prompt token ids outside the vocabulary [0, {limits.vocab_size_padded}) are refused")
        return None

    def _on_adapter(self, request: ExecutorRequest) -> ExecutorRequest:
        """The cached task's adapter for the CPU engine (the base model without a task)."""
        if request.lora_task_id is None:
            return request
        options = dataclasses.replace(request.inputs.options, lora_task_id=self.limits.lora_tasks[request.lora_task_id])
        return dataclasses.replace(request, inputs=dataclasses.replace(request.inputs, options=options))

    def _room(self, request: ExecutorRequest) -> int:
        """Row limit.output_len_clamped: what max_seq_len leaves past the prompt and one step's
        draft tokens (the request's, else the engine's max_draft_len: row error.draft_tokens_too_long)."""
        step = request.draft_len or self.limits.max_draft_len
        return self.limits.max_seq_len - len(request.inputs.input_ids) - step

    def _clamped(self, request: ExecutorRequest) -> ExecutorRequest:
        """Row limit.output_len_clamped: not an error; max new tokens lowered to fit max_seq_len."""
        inputs = request.inputs
        room = self._room(request)
        if inputs.request_output_len <= room:
            return request
        log.warning("Number of requested output tokens is changed to (%d).", room)
        return dataclasses.replace(request, inputs=dataclasses.replace(inputs, request_output_len=room))

    def _run(self, actions: list) -> None:
        for kind, entry, extra in actions:
            if kind == "fail":
                entry.target.failed(entry.executor_id, extra)
                continue
            key = str(entry.executor_id)
            self._engine.submit(entry.request.inputs, _RowSink(self, entry.executor_id), key)
            if extra:  # cancelled while queued: ended as soon as it is active (cancel.queued_request)
                self._engine.stop(key)
