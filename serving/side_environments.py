"""Side environments: virtualenvs inside build/ with exactly the packages of one pinned lock file,
for tools whose pins clash with the project's (Dynamo, genai-perf, AIPerf, the peers).  Made on
first use from the interpreter that made the project's venv."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
# The Python that made the project's venv (the base interpreter), for the side venvs too.
BASE_PYTHON = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
# NVIDIA Dynamo and the kit's Dynamo worker (cluster/): build/dynamo.
DYNAMO_LOCK = ROOT / "requirements" / "dynamo.lock"


def ensure_venv(name: str, lock: Path) -> Path:
    """build/<name>, with exactly the lock's packages (reinstalled when the lock changes).  One
    process installs it at a time: another that wants it waits, then finds it made."""
    venv = BUILD / name
    stamp = venv / ".lock"
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / f".{name}.installing", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if stamp.is_file() and stamp.read_text() == lock.read_text():
            return venv
        subprocess.run([str(BASE_PYTHON), "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-cache-dir"]
        subprocess.run(pip + ["--upgrade", "pip==26.3"], check=True)
        subprocess.run(pip + ["--no-deps", "-r", str(lock)], check=True)
        stamp.write_text(lock.read_text())
    return venv


def dynamo_venv() -> Path:
    """build/dynamo: Dynamo 1.6.1 and the worker's packages (requirements/dynamo.lock says why apart)."""
    return ensure_venv("dynamo", DYNAMO_LOCK)
