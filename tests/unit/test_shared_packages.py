"""build_engines/images/shared_packages.py: a second image environment links the first one's torch
requirements (extras followed) instead of installing them; what it has already stays its own."""

from __future__ import annotations

from pathlib import Path

from build_engines.images.shared_packages import link_missing


def _dist(site: Path, name: str, requires: list[str] = (), files: tuple[str, ...] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires))
    for f in files:
        (site / f).parent.mkdir(parents=True, exist_ok=True)
        (site / f).write_text(name)
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in (*files, f"{info.name}/METADATA", "../../../bin/x")))


def test_torch_and_what_it_requires_with_extras_are_linked_not_copied(tmp_path):
    source, target = tmp_path / "a/lib/python3.12/site-packages", tmp_path / "b/lib/python3.12/site-packages"
    _dist(source, "torch", ["cuda-toolkit[cudart]==13.0", "filelock", 'colorama; sys_platform == "win32"'],
          ("torch/__init__.py",))
    _dist(source, "cuda-toolkit", ['nvidia-cuda-runtime==13.0; extra == "cudart"', 'nvidia-cufft; extra == "cufft"'])
    _dist(source, "nvidia-cuda-runtime", files=("nvidia/cu13/lib/libcudart.so",))
    _dist(source, "nvidia-cufft", files=("nvidia/cu13/lib/libcufft.so",))
    _dist(source, "filelock", files=("filelock.py",))
    _dist(target, "torch", files=("torch/__init__.py",))
    _dist(target, "filelock", files=("filelock.py",))

    assert link_missing(source, target, "torch") == ["cuda-toolkit", "nvidia-cuda-runtime"]
    lib = target / "nvidia/cu13/lib/libcudart.so"
    assert lib.stat().st_ino == (source / "nvidia/cu13/lib/libcudart.so").stat().st_ino
    assert not (target / "nvidia/cu13/lib/libcufft.so").exists()  # an extra torch does not ask for
    assert (target / "filelock.py").stat().st_ino != (source / "filelock.py").stat().st_ino
    assert link_missing(source, target, "torch") == []
