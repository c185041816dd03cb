"""The signals that stop a launcher (`up` and `run` alike): SIGINT, SIGTERM, SIGHUP.

A handler only records the signal; the launcher then drains and stops its server in its own
time.  Python's default for SIGTERM and SIGHUP is to die at once, which left tritonserver
and its stubs running and holding the ports.
"""

from __future__ import annotations

import shutil
import signal
import threading
from types import FrameType
from typing import Any, Callable

# What signal.signal() takes and returns: a handler, SIG_DFL / SIG_IGN, or None (not set from Python).
_Handler = Callable[[int, FrameType | None], Any] | int | None

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


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
        self._previous: dict[signal.Signals, _Handler] = {}

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


def die_with_parent(command: list[str], sig: signal.Signals = signal.SIGTERM) -> list[str]:
    """`command` with Linux asked to send `sig` to it when the launcher dies, even by SIGKILL,
    so its server shuts down instead of running on unowned.  util-linux's `setpriv --pdeathsig`
    sets it and execs the command (same pid); never a `preexec_fn`, which makes Python fork
    and run Python in a child of a process with gRPC/OpenVINO threads (a test server once
    aborted at start so).  Linux ties the death signal to the thread that forks, so only a
    child started from the main thread gets it; without setpriv, the command runs as it is."""
    if threading.current_thread() is not threading.main_thread() or shutil.which("setpriv") is None:
        return list(command)
    return ["setpriv", "--pdeathsig", signal.Signals(sig).name.removeprefix("SIG"), "--", *command]
