"""Keeps one tritonserver serving: restarts it when it dies or when one of its
Python-backend stubs dies.  (Triton does not restart a dead stub: the model stays "ready"
while every request fails with "Stub process ... is not healthy", measured on 2.51.)"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Protocol

log = logging.getLogger(__name__)


class Server(Protocol):
    def start(self) -> None: ...

    def wait_ready(self, timeout_s: float) -> None: ...

    def stop(self, drain: bool = True) -> int | None: ...

    def is_running(self) -> bool: ...

    def stub_pids(self) -> set[int]: ...

    def expected_stubs(self) -> int: ...


@dataclass(frozen=True)
class RestartPolicy:
    max_restarts: int = 5  # within `window_s`; one more and the supervisor gives up
    window_s: float = 600.0
    check_interval_s: float = 1.0
    ready_timeout_s: float = 600.0


class GaveUp(RuntimeError):
    pass


class Supervisor:
    def __init__(self, server: Server, policy: RestartPolicy = RestartPolicy(),
                 clock: Callable[[], float] = time.monotonic, report: Callable[[str], None] = log.warning) -> None:
        self.server = server
        self.policy = policy
        self._clock = clock
        self._report = report
        self._stubs: set[int] = set()
        self._restarts: deque[float] = deque()
        self.restarts = 0

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

    def restart(self, why: str) -> None:
        now = self._clock()
        while self._restarts and now - self._restarts[0] > self.policy.window_s:
            self._restarts.popleft()
        if len(self._restarts) >= self.policy.max_restarts:
            raise GaveUp(f"{why}; already restarted {len(self._restarts)} times in {self.policy.window_s:.0f}s, giving up")
        self._restarts.append(now)
        self.restarts += 1
        self._report(f"{why}: restarting tritonserver (restart {self.restarts})")
        self.server.stop(drain=False)  # broken already: nothing to wait for
        self.server.start()
        self.server.wait_ready(self.policy.ready_timeout_s)
        self.started()
        self._report("tritonserver is ready again")

    def watch(self, stop: threading.Event) -> None:
        """Until `stop` is set: check, and restart on a problem.  Raises GaveUp."""
        while not stop.wait(self.policy.check_interval_s):
            why = self.problem()
            if why:
                self.restart(why)
