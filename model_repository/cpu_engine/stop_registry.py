"""TensorRT-LLM's stop protocol for the CPU engine: a request with stop=true cancels the
running request that has the same Triton request id (as the C++ backend's
handleStopRequest does) and ends it with a final response, as TensorRT-LLM's executor
does for a cancelled request.  (Not with an error: in Triton 2.51 a final *error* response
that follows data responses never reaches a BLS caller's ResponseIterator - observed
here - and the caller would wait forever.)  The engine relay uses it where the Python backend cannot
cancel a BLS stream (Triton 2.51)."""

from __future__ import annotations

import threading
from typing import Sequence

from model_repository.cpu_engine.runner import ResponseSink


class _StoppableSink:
    def __init__(self, inner: ResponseSink, registry: "StopRegistry", request_id: str) -> None:
        self._inner = inner
        self._registry = registry
        self._request_id = request_id
        self.stopped = False

    def is_cancelled(self) -> bool:
        return self.stopped or self._inner.is_cancelled()

    def send(self, ids: Sequence[int], log_probs: Sequence[float], cum_log_prob: float, final: bool) -> None:
        self._inner.send(ids, log_probs, cum_log_prob, final)
        if final:
            self._registry.forget(self._request_id)

    def fail(self, message: str, *, cancelled: bool = False) -> None:
        if self.stopped and cancelled:
            # As TensorRT-LLM ends a request stopped by cancelRequest: a final response
            # (no more tokens), not an error.
            self._inner.send([], [], 0.0, True)
        else:
            self._inner.fail(message, cancelled=cancelled)
        self._registry.forget(self._request_id)


class StopRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, _StoppableSink] = {}

    def register(self, request_id: str, sink: ResponseSink) -> ResponseSink:
        """The sink to hand to the runner; requests without an id cannot be stopped."""
        if not request_id:
            return sink
        wrapped = _StoppableSink(sink, self, request_id)
        with self._lock:
            self._running[request_id] = wrapped
        return wrapped

    def stop(self, request_id: str) -> bool:
        """Mark the request cancelled (the runner drops it at its next step); False if no
        such request is running (it may have finished already: not an error)."""
        with self._lock:
            sink = self._running.get(request_id)
        if sink is None:
            return False
        sink.stopped = True
        return True

    def forget(self, request_id: str) -> None:
        with self._lock:
            self._running.pop(request_id, None)
