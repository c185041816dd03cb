"""Step-by-step progress of a build, with the elapsed time of each step."""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Iterator, TextIO


class StepProgress:
    def __init__(self, total: int, stream: TextIO = sys.stderr) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.started = time.monotonic()

    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[None]:
        self.done += 1
        t0 = time.monotonic()
        print(f"[{self.done}/{self.total}] {title} ...", file=self.stream, flush=True)
        try:
            yield
        except BaseException:
            print(
                f"[{self.done}/{self.total}] {title}: FAILED after {time.monotonic() - t0:.1f}s",
                file=self.stream,
                flush=True,
            )
            raise
        print(f"[{self.done}/{self.total}] {title}: done in {time.monotonic() - t0:.1f}s", file=self.stream, flush=True)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started
