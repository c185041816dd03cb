"""Keeps one child process of a cluster running: started in its own session (so a stop reaches
everything it started), told by Linux to stop when the launcher dies, restarted when it exits
within a restart budget, and stopped with SIGTERM, then SIGKILL after its stop timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from serving.stop_signals import die_with_parent
from serving.supervisor import GaveUp, RestartPolicy


@dataclass(frozen=True)
class ProcessSpec:
    name: str  # e.g. "replica-0", "worker-0", "frontend"
    command: tuple[str, ...]
    log_file: Path
    environment: tuple[tuple[str, str], ...] = ()  # added to the launcher's environment
    stop_timeout_s: float = 30.0  # SIGTERM's grace (a replica drains its in-flight requests)


class Keeper:
    def __init__(
        self,
        spec: ProcessSpec,
        policy: RestartPolicy = RestartPolicy(),
        report: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.policy = policy
        self._report = report
        self._clock = clock
        self.process: subprocess.Popen | None = None
        self.restarts = 0
        self._recent: deque[float] = deque()
        self.stopped = False
        self._lock = threading.Lock()  # check() and stop() come from different threads

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> None:
        self.spec.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.spec.log_file, "ab") as log:
            self.process = subprocess.Popen(
                die_with_parent(list(self.spec.command)),
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **dict(self.spec.environment)},
                start_new_session=True,
            )
        self.stopped = False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def check(self) -> None:
        """Restart it if it exited (not after stop()).  Raises GaveUp past the restart budget."""
        with self._lock:
            self._check()

    def _check(self) -> None:
        if self.stopped or self.process is None or self.alive():
            return
        now = self._clock()
        while self._recent and now - self._recent[0] > self.policy.window_s:
            self._recent.popleft()
        status = self.process.returncode
        if len(self._recent) >= self.policy.max_restarts:
            raise GaveUp(
                f"{self.spec.name} exited ({status}) {len(self._recent) + 1} times in "
                f"{self.policy.window_s:.0f}s; see {self.spec.log_file}"
            )
        self._recent.append(now)
        self.restarts += 1
        self._report(f"{self.spec.name} exited ({status}): restarting it (restart {self.restarts})")
        self.start()

    def stop(self, timeout_s: float | None = None) -> int | None:
        """SIGTERM to its session, SIGKILL after the timeout; its exit status."""
        with self._lock:
            self.stopped = True
        if self.process is None:
            return None
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(self.spec.stop_timeout_s if timeout_s is None else timeout_s)
            except subprocess.TimeoutExpired:
                self._report(f"{self.spec.name} did not stop in time: killing it")
                _signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait()
        _signal_group(self.process.pid, signal.SIGKILL)  # anything of its session left behind
        return self.process.returncode


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
