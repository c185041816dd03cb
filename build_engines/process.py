"""Run one build tool as a child process: its output is kept in a log and, with
`python -m build_engines -v` (or where there is no log), echoed; a failure raises with the
command and the last lines it printed.  Third-party tools print warnings that read like
failures (optimum-intel 2.2: "Path.replace() takes 2 positional arguments but 3 were given",
while the export succeeds), so the default output is our own progress lines only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Sequence


class BuildError(RuntimeError):
    pass


class Echo:
    """Whether child output goes to the terminal (set once by the CLI's -v)."""

    child_output: bool = False


def run_streaming(
    cmd: Sequence[str], log_file: Path | None, *, what: str = "build step", append: bool = False, cwd: str | None = None
) -> None:
    log = open(log_file, "a" if append else "w") if log_file else None
    echo = Echo.child_output or log is None
    if not echo:
        sys.stderr.write(f"    (its output: {log_file}; -v shows it here)\n")
    try:
        proc = subprocess.Popen(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, cwd=cwd or None
        )
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            if echo:
                sys.stderr.write("    " + line)
            if log:
                log.write(line)
            tail = (tail + [line])[-30:]
        if proc.wait() != 0:
            raise BuildError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n" + "".join(tail))
    finally:
        if log:
            log.close()
