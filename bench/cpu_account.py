"""Where the CPU went during a benchmark run: each process of the server (by model) and the
load generator.  On a small host the client and the server share the cores the engine needs,
and the report should say so with numbers, not guesses."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import psutil

LOAD_GENERATOR = "load generator"


def _label(process: psutil.Process) -> str:
    """A Python-backend stub's model name (its argv names .../<model>/1/model.py), else the program."""
    argv = process.cmdline()
    model_py = next((a for a in argv if a.endswith("model.py")), None)
    return model_py.split("/")[-3] if model_py and model_py.count("/") >= 2 else process.name()


def server_cpu_s(server_pid: int) -> dict[str, float]:
    """CPU seconds so far of the server and of each of its children, by label."""
    root = psutil.Process(server_pid)
    totals: dict[str, float] = {}
    for process in [root, *root.children(recursive=True)]:
        try:
            t, label = process.cpu_times(), _label(process)
            totals[label] = totals.get(label, 0.0) + t.user + t.system
        except psutil.Error:
            continue
    return totals


def _children_cpu_s() -> float:
    """CPU seconds of this process's finished children (the load tool runs as one)."""
    t = os.times()
    return t.children_user + t.children_system


def _own_cpu_s() -> float:
    """CPU seconds of this process (an in-process load generator), all its threads."""
    t = os.times()
    return t.user + t.system


@dataclass
class CpuAccount:
    """`with CpuAccount(pid) as account: run the load` -> account.shares: % of one core each.
    The load generator is this process's children (a load tool), or this process itself with
    `in_process` (bench/pipeline_tax.py's asyncio client)."""

    server_pid: int
    in_process: bool = False
    wall_s: float = 0.0
    shares: dict[str, float] = field(default_factory=dict)

    def __enter__(self) -> "CpuAccount":
        self._server, self._generator, self._t0 = (
            server_cpu_s(self.server_pid),
            self._generator_cpu_s(),
            time.monotonic(),
        )
        return self

    def __exit__(self, *exc) -> None:
        self.wall_s = time.monotonic() - self._t0
        used = {k: v - self._server.get(k, 0.0) for k, v in server_cpu_s(self.server_pid).items()}
        used[LOAD_GENERATOR] = self._generator_cpu_s() - self._generator
        self.shares = {k: 100 * v / self.wall_s for k, v in used.items() if self.wall_s > 0}

    def _generator_cpu_s(self) -> float:
        return _own_cpu_s() if self.in_process else _children_cpu_s()

    def summary(self, top: int = 5) -> str:
        ranked = sorted(self.shares.items(), key=lambda kv: -kv[1])[:top]
        return (
            ", ".join(f"{name} {share:.0f}%" for name, share in ranked)
            + f" of one core over {self.wall_s:.0f} s ({psutil.cpu_count()} cores in all)"
        )
