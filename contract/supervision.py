"""What the launcher's supervisor did (serving/supervisor.py), as the models of the server it
restarted read it to publish it (model_repository/triton/supervision_metrics.py): one record
shared by both sides, in a JSON file named by SUPERVISION_FILE_ENV in the server's environment."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from contract.records import write_record

SUPERVISION_FILE_ENV = "KIT_SUPERVISION_FILE"

# Why the supervisor restarted the server (SupervisionRecord.restarts' keys).
SERVER_EXITED, STUB_DIED, WEDGED = "server_exited", "stub_died", "wedged"


@dataclass
class SupervisionRecord:
    restarts: dict[str, int] = field(default_factory=dict)  # reason -> restarts
    wedges: dict[str, int] = field(default_factory=dict)  # entry model (or "openai") -> times found wedged

    def write(self, path: Path) -> None:
        write_record(path, asdict(self))

    @classmethod
    def read(cls, path: Path) -> "SupervisionRecord":
        """The record at `path`; an empty one where there is none yet."""
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return cls()
        return cls(
            {str(k): int(v) for k, v in data.get("restarts", {}).items()},
            {str(k): int(v) for k, v in data.get("wedges", {}).items()},
        )
