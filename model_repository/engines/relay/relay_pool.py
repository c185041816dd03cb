"""The relays' worker threads and their one watcher thread: which relayed requests run, which
the client left (cancelled), which never got a first response (expired), and which still
answer after a stop (the stop is sent again).  What the relays share of these policies with the
engines, and why the rest differs: model_repository/engine_step/loop_policies.py.

Nothing here imports Triton: tests drive it with fakes.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from model_repository.engine_step.loop_policies import FirstTokenDeadline
from model_repository.engines.relay.relay import ERROR, Relay


class CancelWatcher:
    """One thread that looks, every `period_s` and only while there are relays, for relays
    whose client went away (cancelled; TensorRT-LLM's backend polls the same way), relays
    without a first response after `first_token_timeout_s` (failed UNAVAILABLE: the overload
    promise the CPU engine keeps, kept on the GPU path too), and cancelled relays whose engine
    still answers (the stop is sent again, a few times)."""

    RESTOPS, RESTOP_PERIOD_S = 5, 0.2

    def __init__(
        self, period_s: float, first_token_timeout_s: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._period_s = period_s
        self._deadline = FirstTokenDeadline(first_token_timeout_s, where="")  # not "in the queue": the engine's
        self._clock = clock
        self._cond = threading.Condition()
        self._active: set[Relay] = set()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="relay-cancel-watch", daemon=True)
        self._thread.start()

    def add(self, relay: Relay) -> None:
        with self._cond:
            self._active.add(relay)
            self._cond.notify()

    def remove(self, relay: Relay) -> None:
        with self._cond:
            self._active.discard(relay)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(5)

    def check_once(self) -> int:
        """Returns how many relays it cancelled or expired."""
        with self._cond:
            relays = list(self._active)
        now, acted = self._clock(), 0
        for relay in relays:
            if relay.cancelled:
                if relay.stops_sent < self.RESTOPS and now - relay.last_stop >= self.RESTOP_PERIOD_S:
                    relay.stop_again()
            elif relay.sink.is_cancelled():
                relay.cancel()
                acted += 1
            elif not relay.responded and self._deadline.overdue(relay.arrived, now):
                acted += relay.expire(self._deadline.message(relay.arrived, now))
        return acted

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._active and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                self._cond.wait(self._period_s)
            self.check_once()


class RelayPool:
    """Worker threads for relays (each blocks on its BLS stream), the cancel watcher, and the
    relays by request id (what a `stop` request names)."""

    def __init__(
        self,
        max_workers: int,
        cancel_period_s: float,
        on_done: Callable[[Relay, str, float], None] = lambda relay, outcome, seconds: None,
        first_token_timeout_s: float | None = None,
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="relay")
        self._watcher = CancelWatcher(cancel_period_s, first_token_timeout_s)
        self._on_done = on_done
        self._lock = threading.Lock()
        self._by_id: dict[str, set[Relay]] = {}

    def submit(self, relay: Relay) -> None:
        with self._lock:
            self._by_id.setdefault(relay.request_id, set()).add(relay)
        self._watcher.add(relay)
        self._pool.submit(self._run, relay)

    def counts(self) -> tuple[int, int]:
        """(running, waiting): relayed requests the engine answers, and those not answered yet."""
        with self._lock:
            relays = [r for same_id in self._by_id.values() for r in same_id]
        running = sum(r.responded for r in relays)
        return running, len(relays) - running

    def cancel_id(self, request_id: str) -> int:
        """Cancel every running relay of this request id (a `stop` request); how many."""
        with self._lock:
            relays = list(self._by_id.get(request_id, ()))
        for relay in relays:
            relay.cancel()
        return len(relays)

    def _run(self, relay: Relay) -> None:
        started = time.monotonic()
        outcome = ERROR
        try:
            outcome = relay.run()
        finally:
            self._watcher.remove(relay)
            with self._lock:
                same_id = self._by_id.get(relay.request_id)
                if same_id is not None:
                    same_id.discard(relay)
                    if not same_id:
                        del self._by_id[relay.request_id]
            self._on_done(relay, outcome, time.monotonic() - started)

    def shutdown(self) -> None:
        self._watcher.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
