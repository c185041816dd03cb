"""Python-backend stubs that outlive their tritonserver, found and reaped.

Triton starts one `triton_python_backend_stub` per model instance, with the command line
`STUB MODEL_PY SHM_REGION SHM_SIZE SHM_GROWTH PARENT_PID BACKEND_DIR IPC_HANDLE INSTANCE RUNTIME`
(python_backend's stub launcher, Triton 2.51, as seen here), in the server's process group.
When the server dies without stopping them (SIGKILL, a crash), some stay alive under pid 1,
holding the model's memory and ignoring SIGTERM.  A leftover is a live process that names the
dead server as its parent or sits in its process group, and was created while the server
lived (so a recycled pid never matches).  It gets SIGTERM, then SIGKILL after a short grace;
the shared-memory regions of the reaped stubs are unlinked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import psutil

from serving.triton_install import STUB

SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "triton_python_backend_shm_region"
CLOCK_SLACK_S = 0.05  # between two process start times (clock ticks)
COMM_LENGTH = 15  # TASK_COMM_LEN - 1
UNTIL_SLACK_S = 1.0  # between a start time and time.time() (psutil's boot time is whole seconds)


@dataclass(frozen=True)
class StubCommand:
    """What a stub's command line says about it."""

    model: str  # the model instance, e.g. openvino_llm_0_0
    shm_region: str
    parent_pid: int


@dataclass(frozen=True)
class Leftover:
    pid: int
    command: str
    stub: StubCommand | None  # None: another process of the server's group


@dataclass(frozen=True)
class ServerIdentity:
    """A tritonserver process as it was, checkable after it is gone."""

    pid: int
    created: float  # psutil create_time

    @classmethod
    def of(cls, pid: int) -> "ServerIdentity":
        return cls(pid, psutil.Process(pid).create_time())

    def is_alive(self) -> bool:
        try:
            process = psutil.Process(self.pid)
            return (
                abs(process.create_time() - self.created) < CLOCK_SLACK_S and process.status() != psutil.STATUS_ZOMBIE
            )
        except psutil.Error:
            return False


def parse_stub_command(argv: list[str]) -> StubCommand | None:
    """The stub's identity from its argv; None if it is not a Python-backend stub."""
    if not argv or Path(argv[0]).name != STUB or len(argv) < 9:
        return None
    if not argv[5].isdigit() or not argv[2].startswith(SHM_PREFIX):
        return None
    return StubCommand(model=argv[8], shm_region=argv[2], parent_pid=int(argv[5]))


def is_stub_name(comm: str) -> bool:
    """A process name (Linux keeps 15 characters of it, all a zombie has left) of a stub."""
    return len(comm) >= COMM_LENGTH and STUB.startswith(comm)


def belongs_to(
    server: ServerIdentity, pid: int, pgid: int, created: float, stub: StubCommand | None, until: float
) -> bool:
    """Whether a process (not the server itself) is a leftover of `server`, dead at `until`."""
    if pid == server.pid or not server.created - CLOCK_SLACK_S <= created <= until + UNTIL_SLACK_S:
        return False
    return pgid == server.pid or (stub is not None and stub.parent_pid == server.pid)


def find_leftovers(server: ServerIdentity, until: float) -> list[Leftover]:
    """Live processes that `server` left behind; `until`: a time when it was already dead.
    Those that died re-parented to this process (it is pid 1 in a container) are waited for."""
    found = []
    for process in psutil.process_iter(["pid", "ppid", "name", "cmdline", "create_time", "status"]):
        info = process.info
        if info["create_time"] is None:
            continue
        if info["status"] == psutil.STATUS_ZOMBIE:
            if info["ppid"] == os.getpid() and is_stub_name(info["name"] or ""):
                _collect(info["pid"])
            continue
        argv = info["cmdline"] or []
        stub = parse_stub_command(argv)
        try:
            pgid = os.getpgid(info["pid"])
        except OSError:
            continue
        if belongs_to(server, info["pid"], pgid, info["create_time"], stub, until):
            found.append(Leftover(info["pid"], " ".join(argv), stub))
    return found


def _collect(pid: int) -> None:
    """Wait for one dead child, by pid: never waitpid(-1), which takes other children's status."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stubs_of(server_pid: int) -> dict[int, StubCommand]:
    """Live stubs that tritonserver `server_pid` runs now (its children), by pid."""
    try:
        children = psutil.Process(server_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    stubs = {}
    for child in children:
        try:
            stub = parse_stub_command(child.cmdline())
            if stub and child.status() != psutil.STATUS_ZOMBIE:
                stubs[child.pid] = stub
        except psutil.Error:
            continue
    return stubs


def reap(leftovers: list[Leftover], grace_s: float = 3.0, report: Callable[[str], None] = print) -> None:
    """SIGTERM, then SIGKILL after `grace_s`; then unlink the stubs' shared-memory regions."""
    if not leftovers:
        return
    processes = []
    for leftover in leftovers:
        try:
            process = psutil.Process(leftover.pid)
            process.terminate()
            processes.append(process)
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(processes, timeout=grace_s)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    _, stuck = psutil.wait_procs(alive, timeout=5)
    what = ", ".join(f"{x.pid} ({x.stub.model if x.stub else x.command[:80]})" for x in leftovers)
    report(
        f"reaped {len(leftovers)} process(es) left by tritonserver: {what}"
        + (f"; SIGKILL needed for {sorted(p.pid for p in alive)}" if alive else "")
    )
    if stuck:
        report(f"could not end process(es) {sorted(p.pid for p in stuck)}")
    unlink_regions(x.stub.shm_region for x in leftovers if x.stub)


def unlink_regions(names, shm_dir: Path = SHM_DIR) -> None:
    """Remove the stubs' shared-memory regions (the server would have, had it shut down)."""
    for name in names:
        if name.startswith(SHM_PREFIX) and "/" not in name:
            (shm_dir / name).unlink(missing_ok=True)
