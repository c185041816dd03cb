"""Keeps one tritonserver serving: restarts it when it dies, when one of its Python-backend
stubs dies, or when an entry model stops answering (the canary, serving/canary.py).  Triton
does neither: a dead stub's model stays "ready" while every request fails with "Stub process
... is not healthy", and a wedged one stays "ready" while every request waits (measured on
2.51).  What it did is counted in a SupervisionRecord, which the restarted server's models
publish as metrics (model_repository/triton/supervision_metrics.py, contract/supervision.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from contract.supervision import SERVER_EXITED, STUB_DIED, WEDGED, SupervisionRecord
from serving.canary import Canary, CanaryResult, WedgeTracker

log = logging.getLogger(__name__)


class Server(Protocol):
    def start(self) -> None: ...

    def wait_ready(self, timeout_s: float) -> None: ...

    def stop(self, drain: bool = True) -> int | None: ...

    def is_running(self) -> bool: ...

    def stub_pids(self) -> set[int]: ...

    def expected_stubs(self) -> int: ...

    def set_ready(self, ready: bool) -> None: ...


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5  # within `window_s`; one more and the supervisor gives up
    window_s: float = 600.0
    check_interval_s: float = 1.0
    ready_timeout_s: float = 600.0


class GaveUp(RuntimeError):
    pass


class Supervisor:
    def __init__(
        self,
        server: Server,
        policy: RestartPolicy = RestartPolicy(),
        clock: Callable[[], float] = time.monotonic,
        report: Callable[[str], None] = log.warning,
        canary: Canary | None = None,
        record_file: Path | None = None,
    ) -> None:
        self.server = server
        self.policy = policy
        self._clock = clock
        self._report = report
        self._stubs: set[int] = set()
        self._restarts: deque[float] = deque()
        self.restarts = 0
        self.canary = canary
        self.tracker = WedgeTracker(canary.settings.failures_to_wedge if canary else 1)
        self.record = SupervisionRecord()
        self._record_file = record_file
        self._wedged: list[CanaryResult] = []
        self._restarting = False  # the canary waits while the server restarts
        self._lock = threading.Lock()

    def started(self) -> None:
        """Call once the server is ready: the stubs it has now are the ones it needs."""
        self._stubs = self.server.stub_pids()

    def problem(self) -> str | None:
        if not self.server.is_running():
            return "tritonserver exited"
        alive = self.server.stub_pids()
        missing = self._stubs - alive
        if missing:
            return f"Python-backend stub process(es) {sorted(missing)} died"
        expected = self.server.expected_stubs()
        if len(alive) < expected:  # one died before we first looked
            return f"{expected - len(alive)} Python-backend stub process(es) missing ({len(alive)} of {expected} alive)"
        return None

    def check_canary(self) -> None:
        """One round of the canary: the server is ready only while every entry answers; an
        entry that failed `failures_to_wedge` times in a row makes the server wedged (the next
        check restarts it)."""
        if self.canary is None or self._restarting:
            return
        results = self.canary.probe()
        with self._lock:
            if self._restarting:  # the results are the old server's
                return
            wedged = self.tracker.record(results)
            self.record.wedges = dict(self.tracker.wedges)
            self._wedged = wedged
        failing = [r for r in results if not r.answered]
        for result in failing:
            self._report(f"canary: {result.entry}: {result.detail}")
        self.server.set_ready(not failing)
        self._save()

    def wedge(self) -> str | None:
        with self._lock:
            wedged = self._wedged
        if not wedged:
            return None
        return "wedged: " + "; ".join(
            f"{r.entry} gave no answer ({r.detail}), {self.tracker.failures[r.entry]} canaries in a row" for r in wedged
        )

    def _save(self) -> None:
        if self._record_file is not None:
            with self._lock:
                self.record.write(self._record_file)

    def restart(self, why: str) -> None:
        now = self._clock()
        while self._restarts and now - self._restarts[0] > self.policy.window_s:
            self._restarts.popleft()
        if len(self._restarts) >= self.policy.max_restarts:
            raise GaveUp(
                f"{why}; already restarted {len(self._restarts)} times in {self.policy.window_s:.0f}s, giving up"
            )
        self._restarts.append(now)
        self.restarts += 1
        reason = WEDGED if why.startswith("wedged") else SERVER_EXITED if why == "tritonserver exited" else STUB_DIED
        with self._lock:
            self.record.restarts[reason] = self.record.restarts.get(reason, 0) + 1
            self._wedged = []
            self.tracker.reset()
            self._restarting = True
        self._save()  # before the new server starts: its models publish the counts
        self._report(f"{why}: restarting tritonserver (restart {self.restarts})")
        self.server.set_ready(False)
        self.server.stop(drain=False)  # broken already: nothing to wait for
        try:
            self.server.start()
            self.server.wait_ready(self.policy.ready_timeout_s)
            self.started()
        finally:
            with self._lock:
                self.tracker.reset()
                self._restarting = False
        self.server.set_ready(True)
        self._report("tritonserver is ready again")

    def watch(self, stop: threading.Event) -> None:
        """Until `stop` is set: check, and restart on a problem (the canary runs on a thread of
        its own, every `period_s`).  Raises GaveUp."""
        canary = None
        if self.canary is not None:
            canary = threading.Thread(target=self._canary_loop, args=(stop,), name="canary", daemon=True)
            canary.start()
        while not stop.wait(self.policy.check_interval_s):
            why = self.problem() or self.wedge()
            if why:
                self.restart(why)

    def _canary_loop(self, stop: threading.Event) -> None:
        assert self.canary is not None  # started only with a canary
        while not stop.wait(self.canary.settings.period_s):
            try:
                self.check_canary()
            except Exception as e:  # never let the canary thread die silently
                self._report(f"canary failed to run: {e}")
