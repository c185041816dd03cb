"""Run one build tool as a child process: its output is echoed (its own progress bars) and
kept in a log; a failure raises with the command and the last lines it printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Sequence


class BuildError(RuntimeError):
    pass


def run_streaming(cmd: Sequence[str], log_file: Path | None, *, what: str = "build step", append: bool = False) -> None:
    log = open(log_file, "a" if append else "w") if log_file else None
    try:
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stderr.write("    " + line)
            if log:
                log.write(line)
            tail = (tail + [line])[-30:]
        if proc.wait() != 0:
            raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n" + "".join(tail))
    finally:
        if log:
            log.close()
