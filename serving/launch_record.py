"""The record a detached launcher keeps (build/tritonserver.pid): who runs, and whether ready.

`serving up --detach` waits for `ready` from the launcher it started (never for a probe that
another server could answer); `serving down` stops that launcher, and if it is gone or leaves
something behind, the tritonserver it recorded and that server's leftover stubs.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from contract.records import write_record

PID_FILE = Path("build/tritonserver.pid")


class RecordError(RuntimeError):
    pass


@dataclass(frozen=True)
class LaunchRecord:
    launcher_pid: int
    server_pid: int | None = None  # the tritonserver it runs now (it changes on a restart)
    server_created: float | None = None  # its start time, so a recycled pid never matches
    ready: bool = False

    def write(self, path: Path) -> None:
        write_record(path, asdict(self))

    @classmethod
    def read(cls, path: Path) -> "LaunchRecord":
        text = path.read_text().strip()
        if text.isdigit():  # written by an older launcher: its pid only
            return cls(launcher_pid=int(text))
        try:
            fields = json.loads(text)
            return cls(**fields)
        except (ValueError, TypeError) as e:
            raise RecordError(
                f"{path} is not a launch record ({e}); remove it after stopping the server by hand"
            ) from None
