"""The `tritonserver` binary and Python backend that the nvidia-pytriton wheel ships.

The wheel keeps the per-Python backend stubs apart from the backend; Triton wants the stub
inside the backend directory, so we assemble a server directory once (a copy, ~30 MB) and
reuse it while the wheel's version stays the same.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

PYTRITON_DIST = "nvidia-pytriton"
STUB = "triton_python_backend_stub"


class TritonNotInstalled(RuntimeError):
    pass


@dataclass(frozen=True)
class TritonInstall:
    root: Path
    lib_dir: Path  # shared libraries the binaries were linked against (wheel's .libs)

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def backends(self) -> Path:
        return self.root / "backends"


def _wheel_paths() -> tuple[Path, Path, str]:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonNotInstalled("tritonserver comes from the nvidia-pytriton wheel: pip install nvidia-pytriton==0.7.0")
    package = Path(list(spec.submodule_search_locations)[0])
    return package / "tritonserver", package.parent / "nvidia_pytriton.libs", metadata.version(PYTRITON_DIST)


def prepare_install(target: Path) -> TritonInstall:
    """Assemble (or reuse) a runnable server directory at `target`."""
    source, lib_dir, version = _wheel_paths()
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    stamp = target / ".version"
    wanted = f"{PYTRITON_DIST}=={version} python{py}"
    if not (stamp.is_file() and stamp.read_text() == wanted):
        stub = source / "python_backend_stubs" / py / STUB
        if not stub.is_file():
            raise TritonNotInstalled(f"the wheel has no Python-backend stub for Python {py} ({stub})")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("python_backend_stubs", "__pycache__"))
        shutil.copy2(stub, target / "backends" / "python" / STUB)
        stamp.write_text(wanted)
    return TritonInstall(root=target, lib_dir=lib_dir)
