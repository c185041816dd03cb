"""A thread that sleeps a period, then calls a function (upstream's WaitForCancel and
WaitForStats threads: rows cancel.poll and metric.stats_period)."""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(self, period_s: float, action: Callable[[], object], name: str) -> None:
        self._period_s = period_s
        self._action = action
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> "Periodic":
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> bool:
        """True once the thread has ended (it may still run its action after a timeout)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stopping.wait(self._period_s):
            try:
                self._action()
            except Exception:  # a failing poll must not end the polling
                log.exception("%s failed", self._thread.name)
