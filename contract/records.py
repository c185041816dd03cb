"""Small JSON records that one process writes and others read while it runs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_record(path: Path, data: dict[str, Any]) -> None:
    """Write `data` as one JSON line, whole or not at all: readers never see half a record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(data) + "\n")
    tmp.replace(path)
