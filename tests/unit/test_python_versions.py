"""Which Python the server can run under: the Python-backend stub matching the interpreter
(nvidia-pytriton 0.7.0 ships 3.8-3.13), its shared libpython found on the library path."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving import triton_install
from serving.launcher import server_env
from serving.triton_install import SUPPORTED_PYTHONS, TritonInstall, TritonNotInstalled, libpython_dir


def config(shared: int, library: str, libdir: str = "/opt/py/lib"):
    return {"Py_ENABLE_SHARED": shared, "LDLIBRARY": library, "LIBDIR": libdir}.get


def test_shared_interpreter_gives_its_libdir():
    assert libpython_dir(config(1, "libpython3.11.so", "/root/.pyenv/versions/3.12.1/lib")) == Path("/root/.pyenv/versions/3.12.1/lib")


def test_static_interpreter_is_refused_with_the_way_out():
    with pytest.raises(TritonNotInstalled, match="--enable-shared"):
        libpython_dir(config(0, "libpython3.11.a"))


@pytest.mark.parametrize("py", ["3.9", "3.13"])
def test_unsupported_version_is_refused(monkeypatch, py):
    monkeypatch.setattr(triton_install, "python_version", lambda: py)
    with pytest.raises(TritonNotInstalled, match="3.10, 3.11, 3.12 .*numpy < 2"):
        libpython_dir(config(1, f"libpython{py}.so"))


def test_the_wheel_ships_a_stub_for_every_supported_python():
    source, _, _ = triton_install._wheel_paths()
    for py in SUPPORTED_PYTHONS:
        assert (source / "python_backend_stubs" / py / triton_install.STUB).is_file(), py


def test_this_interpreter_is_usable():
    assert triton_install.python_version() in SUPPORTED_PYTHONS
    assert list(libpython_dir().glob(f"libpython{triton_install.python_version()}*.so*"))


def test_server_env_puts_libpython_on_the_library_path():
    env = server_env(TritonInstall(Path("/t"), Path("/libs"), Path("/py/lib")), {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"})
    assert env["LD_LIBRARY_PATH"] == "/libs:/py/lib:/x"


def test_each_interpreter_assembles_its_own_server_directory(monkeypatch):
    """Two interpreters' runs side by side (make test and make test-image) must not swap the stub
    of a server the other one is starting: the directory that holds the stub is per Python."""
    dirs = set()
    for py in SUPPORTED_PYTHONS:
        monkeypatch.setattr(triton_install, "python_version", lambda py=py: py)
        dirs.add(triton_install.server_dir(Path("build")))
    assert len(dirs) == len(SUPPORTED_PYTHONS) and all(d.parent == Path("build") for d in dirs)
