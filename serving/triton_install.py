"""The `tritonserver` binary and Python backend that the nvidia-pytriton wheel ships.

The wheel keeps the per-Python backend stubs apart from the backend; Triton wants the stub
inside the backend directory, so we assemble a server directory once (a copy, ~30 MB) and
reuse it while the wheel's version stays the same.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

PYTRITON_DIST = "nvidia-pytriton"
STUB = "triton_python_backend_stub"
# CPython versions whose stub the nvidia-pytriton 0.7.0 wheel carries (it has 3.8-3.13) and
# that the kit's pinned packages install on.  Not 3.13: the models' environment needs
# numpy < 2 (Triton 2.51's stub returns empty tensors with numpy 2), and numpy 1.26.4, the
# last 1.x, has no CPython 3.13 wheels (numpy's first are 2.1.0).
SUPPORTED_PYTHONS = ("3.10", "3.11", "3.12")


class TritonNotInstalled(RuntimeError):
    pass


@dataclass(frozen=True)
class TritonInstall:
    root: Path
    lib_dir: Path  # shared libraries the binaries were linked against (wheel's .libs)
    python_lib_dir: Path | None = None  # where the stub finds libpython3.X.so (not on the default path for pyenv & co)

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def backends(self) -> Path:
        return self.root / "backends"


def _wheel_paths() -> tuple[Path, Path, str]:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise TritonNotInstalled(
            "tritonserver comes from the nvidia-pytriton wheel: pip install nvidia-pytriton==0.7.0"
        )
    package = Path(list(spec.submodule_search_locations)[0])
    return package / "tritonserver", package.parent / "nvidia_pytriton.libs", metadata.version(PYTRITON_DIST)


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def server_dir(build: Path = Path("build")) -> Path:
    """Where this interpreter's server directory is assembled: one per Python, since it holds that
    Python's stub (a second interpreter's run, e.g. `make test-image`, must not swap the stub of a
    server the first one is starting)."""
    return build / f"tritonserver-py{python_version()}"


def libpython_dir(config_var=sysconfig.get_config_var) -> Path:
    """The directory of this interpreter's shared libpython, which the stub links against.
    A statically linked interpreter (no libpython3.X.so) cannot host the Python backend."""
    py = python_version()
    if py not in SUPPORTED_PYTHONS:
        raise TritonNotInstalled(
            f"Python {py} is not supported: use CPython {', '.join(SUPPORTED_PYTHONS)} "
            f"(3.13: numpy < 2, which Triton 2.51's stub needs, has no 3.13 wheels)"
        )
    library = config_var("LDLIBRARY") or ""
    if not config_var("Py_ENABLE_SHARED") or not library.endswith(".so"):
        raise TritonNotInstalled(
            f"{sys.executable} (Python {py}) has no shared libpython{py}.so, which Triton's Python-backend stub loads: "
            f"use an interpreter built with --enable-shared (Debian/Ubuntu python{py}; pyenv with "
            f"PYTHON_CONFIGURE_OPTS=--enable-shared; python.org builds)"
        )
    return Path(config_var("LIBDIR"))


def prepare_install(target: Path) -> TritonInstall:
    """Assemble (or reuse) a runnable server directory at `target`, with the stub for this Python."""
    source, lib_dir, version = _wheel_paths()
    python_lib_dir = libpython_dir()
    py = python_version()
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
    return TritonInstall(root=target, lib_dir=lib_dir, python_lib_dir=python_lib_dir)
