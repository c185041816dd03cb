"""The GPU an engine is built for: compute capability (SM), memory, count.

A TensorRT engine runs only on the GPU architecture it was built on, and which precisions
exist depends on that architecture, so the target GPU is part of the build spec.  Inside
the image it is read from `nvidia-smi`; elsewhere (planning on a laptop) it is named.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

# TensorRT-LLM 1.1 and 1.2 support Ampere (SM 8.0/8.6), Ada (8.9), Hopper (9.0) and Blackwell
# (docs/source/reference/support-matrix.md, "Hardware" and "Precision").  What a Blackwell
# data-centre part (SM 10.x) refuses is an upstream rule: see build_engines/trtllm/rules.py.
MIN_SM = 80
FP8_MIN_SM = 89  # FP8 weights and FP8 KV cache: Ada Lovelace / Hopper or newer
ARCHITECTURES = {
    70: "Volta",
    75: "Turing",
    80: "Ampere",
    86: "Ampere",
    87: "Ampere",
    89: "Ada Lovelace",
    90: "Hopper",
    100: "Blackwell",
    103: "Blackwell",
    120: "Blackwell",
}


class GpuError(ValueError):
    pass


@dataclass(frozen=True)
class GpuTarget:
    name: str
    sm: int  # compute capability x 10: 90 for 9.0
    memory_gib: float  # per GPU
    count: int = 1  # GPUs on the host

    @property
    def architecture(self) -> str:
        return ARCHITECTURES.get(self.sm, f"SM {self.sm / 10:.1f}")

    def describe(self) -> str:
        return f"{self.count} x {self.name} (SM {self.sm / 10:.1f}, {self.architecture}, {self.memory_gib:g} GiB)"


# name -> (SM, GiB per GPU); the common data-centre and workstation parts.
KNOWN_GPUS: dict[str, tuple[int, float]] = {
    "V100": (70, 32),
    "T4": (75, 16),
    "A10": (86, 24),
    "A10G": (86, 24),
    "A30": (80, 24),
    "A40": (86, 48),
    "A100-40GB": (80, 40),
    "A100-80GB": (80, 80),
    "L4": (89, 24),
    "L40": (89, 48),
    "L40S": (89, 48),
    "RTX-4090": (89, 24),
    "RTX-6000-ADA": (89, 48),
    "H100-PCIE": (90, 80),
    "H100-SXM": (90, 80),
    "H100-NVL": (90, 94),
    "H200": (90, 141),
    "GH200": (90, 96),
    "B200": (100, 180),
    "GB200": (100, 186),
    "B300": (103, 268),
    "RTX-PRO-6000": (120, 96),  # Blackwell workstation/server part: SM 12.0, outside the SM 10.x rules
}
DEFAULT_GPU = "H100-SXM"  # what `plan` assumes when it is told nothing and sees no GPU


def known_gpu(name: str, count: int = 1) -> GpuTarget:
    key = name.upper()
    if key not in KNOWN_GPUS:
        raise GpuError(
            f"'gpu' {name!r} is not a known GPU; known: {sorted(KNOWN_GPUS)} (or give --gpu-sm and --gpu-memory-gib)"
        )
    sm, memory = KNOWN_GPUS[key]
    return GpuTarget(name=key, sm=sm, memory_gib=memory, count=count)


def parse_nvidia_smi(csv_text: str) -> GpuTarget | None:
    """Output of `nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv,noheader,nounits`
    (memory in MiB), one line per GPU -> the host's GPUs, which must all be alike."""
    rows = [[c.strip() for c in line.split(",")] for line in csv_text.strip().splitlines() if line.strip()]
    if not rows:
        return None
    kinds = {(r[0], r[1]) for r in rows}
    if len(kinds) > 1:
        raise GpuError(f"this host mixes GPU kinds {sorted(kinds)}; an engine targets one kind")
    name, cap, mib = rows[0][0], rows[0][1], min(float(r[2]) for r in rows)
    major, _, minor = cap.partition(".")
    return GpuTarget(name=name, sm=int(major) * 10 + int(minor or 0), memory_gib=round(mib / 1024, 1), count=len(rows))


NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=name,compute_cap,memory.total", "--format=csv,noheader,nounits"]


def detect_gpus() -> GpuTarget | None:
    """The GPUs of this host, or None where there is no NVIDIA driver."""
    if shutil.which(NVIDIA_SMI_QUERY[0]) is None:
        return None
    result = subprocess.run(NVIDIA_SMI_QUERY, capture_output=True, text=True, timeout=30)
    return parse_nvidia_smi(result.stdout) if result.returncode == 0 else None
