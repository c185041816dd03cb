"""Which llama.cpp build serves as the peer, and why: the native one (`-DGGML_NATIVE=ON`, as a
user would build it for this host) where it answers a real request, else one with this CPU's
features named explicitly (`GGML_NATIVE=OFF`, AMX off).  On an Intel Xeon with AMX the native
`llama-server` died at start with SIGILL while `llama-bench` ran; built with AVX-512, VNNI and
BF16 on and AMX off it served.  Pure logic: the flags from /proc/cpuinfo, the probe's record
kept beside a build, and the report's words."""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

# The vendored llama.cpp's x86 feature options and the /proc/cpuinfo flags each needs, read in
# llama-cpp-python 0.3.36's sdist (sha256 832db069..., bench/peer_builds.LLAMA_CPP_PYTHON):
# vendor/llama.cpp/ggml/CMakeLists.txt lines 154-170 declare GGML_SSE42, GGML_AVX, GGML_AVX_VNNI,
# GGML_AVX2, GGML_BMI2, GGML_AVX512, GGML_AVX512_VBMI, GGML_AVX512_VNNI, GGML_AVX512_BF16,
# GGML_FMA, GGML_F16C, GGML_AMX_TILE, GGML_AMX_INT8, GGML_AMX_BF16; with GGML_NATIVE=OFF (lines
# 141-145) SSE42/AVX/AVX2/BMI2/FMA/F16C default ON and the rest OFF, so every one is set here.
# vendor/llama.cpp/ggml/src/ggml-cpu/CMakeLists.txt lines 346-408 (gcc/clang, not native) turn
# each into its -m flag: GGML_AVX512 is -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw.
GGML_X86_OPTIONS: dict[str, tuple[str, ...]] = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_BMI2": ("bmi2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512vbmi",),
    "GGML_AVX512_VNNI": ("avx512_vnni",),
    "GGML_AVX512_BF16": ("avx512_bf16",),
}
# Off whatever the CPU says: the native build that died with SIGILL had them (cpuinfo lists
# amx_tile/amx_int8/amx_bf16 there).
GGML_AMX_OPTIONS = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")

PROBE_RECORD = "probe.json"  # beside each build: its probe's outcome on the CPU it ran on


def cpu_flags(cpuinfo: str) -> set[str]:
    return set(next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")), []))


def cpu_identity(cpuinfo: str) -> str:
    """The CPU a probe ran on: its model name and a digest of its flags (build/ may be shared by
    hosts with other CPUs, where a native build may not run)."""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "")
    digest = hashlib.sha256(" ".join(sorted(cpu_flags(cpuinfo))).encode()).hexdigest()[:12]
    return f"{model or 'unknown CPU'} (flags {digest})"


def explicit_options(flags: set[str]) -> dict[str, bool]:
    """GGML_NATIVE off, each x86 feature on exactly where the CPU has every flag it needs, AMX off."""
    options = {"GGML_NATIVE": False}
    options.update({name: set(needs) <= flags for name, needs in GGML_X86_OPTIONS.items()})
    options.update(dict.fromkeys(GGML_AMX_OPTIONS, False))
    return options


class BuildKind(str, enum.Enum):
    NATIVE = "native"
    EXPLICIT = "explicit"


@dataclass(frozen=True)
class LlamaBuild:
    """One llama.cpp build: how it is configured and the directory (in the sdist's tree) it lives in."""

    kind: BuildKind
    options: tuple[tuple[str, bool], ...]

    @classmethod
    def native(cls) -> "LlamaBuild":
        return cls(BuildKind.NATIVE, (("GGML_NATIVE", True),))

    @classmethod
    def explicit(cls, flags: set[str]) -> "LlamaBuild":
        return cls(BuildKind.EXPLICIT, tuple(explicit_options(flags).items()))

    @property
    def directory(self) -> str:
        return "build" if self.kind is BuildKind.NATIVE else "build-explicit"

    def cmake_definitions(self) -> list[str]:
        return [f"-D{name}={'ON' if on else 'OFF'}" for name, on in self.options]

    def enabled(self) -> list[str]:
        return [name for name, on in self.options if on]

    def describe(self) -> str:
        if self.kind is BuildKind.NATIVE:
            return "native (-DGGML_NATIVE=ON)"
        off = [name for name, on in self.options if not on and name != "GGML_NATIVE"]
        return f"explicit flags (GGML_NATIVE=OFF; on: {', '.join(self.enabled()) or 'none'}; off: {', '.join(off)})"


@dataclass(frozen=True)
class ProbeRecord:
    """A build's probe (a short completion through its server) on one CPU: `reason` is why it
    failed, None where it answered."""

    cpu: str
    reason: str | None

    @property
    def ok(self) -> bool:
        return self.reason is None

    def write(self, build_dir: Path) -> None:
        (build_dir / PROBE_RECORD).write_text(
            json.dumps({"cpu": self.cpu, "ok": self.ok, "reason": self.reason}) + "\n"
        )

    @classmethod
    def read(cls, build_dir: Path, cpu: str) -> "ProbeRecord | None":
        """The recorded probe where one was made on this CPU; None where none was (or it is unreadable)."""
        try:
            data = json.loads((build_dir / PROBE_RECORD).read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("cpu") != cpu:
            return None
        return cls(cpu, None if data.get("ok") is True else str(data.get("reason") or "failed"))


@dataclass(frozen=True)
class BuildChoice:
    """The build that serves and why, as the report says it."""

    build: LlamaBuild
    why: str

    def describe(self) -> str:
        return f"llama.cpp build: {self.build.describe()}: {self.why}"

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.build.kind.value, "options": dict(self.build.options), "why": self.why}
