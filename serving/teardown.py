"""`serving down`: stop a detached launcher, then whatever of its server is still there.

The launcher drains and stops its own server on SIGTERM.  If it is gone already (killed,
crashed) or does not finish, the tritonserver it recorded is stopped here, and that server's
leftover stubs are reaped either way.
"""

from __future__ import annotations

import time
from typing import Callable

import psutil

from serving import stubs
from serving.launch_record import LaunchRecord

LAUNCHER_MODULE = "serving"


class StillRunning(RuntimeError):
    pass


def launcher_process(pid: int) -> psutil.Process | None:
    """The launcher with this pid, if it still runs (a recycled pid running something else: None)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE or LAUNCHER_MODULE not in process.cmdline():
            return None
        return process
    except psutil.Error:
        return None


def end(process: psutil.Process, timeout_s: float) -> bool:
    """SIGTERM and wait; SIGKILL after `timeout_s`.  True if it had to be killed."""
    try:
        process.terminate()
        process.wait(timeout_s)
        return False
    except psutil.TimeoutExpired:
        process.kill()
        process.wait(10)
        return True
    except psutil.NoSuchProcess:
        return False


def stop_recorded(record: LaunchRecord, timeout_s: float, report: Callable[[str], None]) -> None:
    """Stop the launcher of `record` (it drains its server), then its server and leftovers."""
    launcher = launcher_process(record.launcher_pid)
    if launcher is None:
        report(f"launcher pid {record.launcher_pid} is not running")
    else:
        launcher.terminate()
        try:
            launcher.wait(timeout_s)
        except psutil.TimeoutExpired:
            raise StillRunning(
                f"launcher pid {record.launcher_pid} still running after {timeout_s:.0f}s "
                f"(it drains in-flight requests first); run `make stop` again to wait longer"
            ) from None
    if record.server_pid is None or record.server_created is None:
        return
    server = stubs.ServerIdentity(record.server_pid, record.server_created)
    if server.is_alive():
        report(f"tritonserver pid {server.pid} outlived its launcher: stopping it")
        if end(psutil.Process(server.pid), timeout_s):
            report(f"tritonserver pid {server.pid} needed SIGKILL")
    stubs.reap(stubs.find_leftovers(server, until=time.time()), report=report)
