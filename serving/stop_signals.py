"""The signals that stop a launcher (`up` and `run` alike): SIGINT, SIGTERM, SIGHUP.

A handler only records the signal; the launcher then drains and stops its server in its own
time.  Python's default for SIGTERM and SIGHUP is to die at once, which left tritonserver
and its stubs running and holding the ports.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from typing import Callable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class SignalSafeEvent(threading.Event):
    """An Event that a signal handler may set.  A handler runs in the main thread between two
    bytecodes, possibly while that thread holds the Event's internal lock (inside wait() or
    is_set()); with the stock non-reentrant lock, set() would then deadlock."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition(threading.RLock())


class StopSignals:
    """Context manager: while inside, STOP_SIGNALS set `event` (and `received`)."""

    def __init__(self) -> None:
        self.event = SignalSafeEvent()
        self.received: signal.Signals | None = None
        self._previous: dict[signal.Signals, object] = {}

    def _handle(self, signum: int, _frame) -> None:
        if self.received is None:
            self.received = signal.Signals(signum)
        self.event.set()

    def __enter__(self) -> "StopSignals":
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @property
    def exit_status(self) -> int:
        """The shell's status for a process ended by the signal received (128 + its number)."""
        return 128 + int(self.received) if self.received else 0


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` asking Linux to send `sig` to the child when the launcher dies, even by
    SIGKILL, so its server shuts down instead of running on unowned.  Linux ties this to the
    thread that forks, so only a child started from the main thread gets it (None otherwise)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child only calls it
    parent = os.getpid()

    def in_child() -> None:
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os.kill(os.getpid(), sig)

    return in_child
