"""`build.json`: the provenance record written next to every built engine.

The build writes it; the engine model reads it at load and refuses to serve an engine built
by other runtime versions than the ones it runs with (upstream's "Serialization ... Version
tag does not match", but said in words that name both versions).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

BUILD_RECORD_FILE = "build.json"
FORMAT_VERSION = 1

# The packages whose version must match between build and serve, per engine backend.
# OpenVINO IR is forward compatible across releases, but the KV-cache layout and
# continuous-batching transformations are not promised to be: we pin exact versions.
RUNTIME_PACKAGES: dict[str, tuple[str, ...]] = {
    "openvino": ("openvino", "openvino-genai"),
    "tensorrt_llm": ("tensorrt_llm", "tensorrt"),
    # The PyTorch backend loads a Hugging Face checkpoint (no engine); the checkpoint's
    # ModelOpt quantization must be one this TensorRT-LLM loads, so the version must match.
    "tensorrt_llm_pytorch": ("tensorrt_llm",),
}


# NGC Triton images say which release they are (e.g. NVIDIA_TRITON_SERVER_VERSION=25.12).
CONTAINER_VERSION_VARIABLES = ("NVIDIA_TRITON_SERVER_VERSION", "TRITON_SERVER_VERSION")


def container_version(environ: dict[str, str] | None = None) -> str:
    """The Triton container release this process runs in ('none' outside an NGC image)."""
    env = os.environ if environ is None else environ
    return next((env[v] for v in CONTAINER_VERSION_VARIABLES if env.get(v)), "none")


class BuildRecordError(RuntimeError):
    pass


@dataclass(frozen=True)
class BuildRecord:
    backend: str
    spec: dict[str, Any]  # BuildSpec.to_dict()
    checkpoint: dict[str, Any]  # CheckpointInfo.to_dict() + hash
    versions: dict[str, str]  # package -> version at build time
    built_at: str
    build_seconds: float
    artifacts: dict[str, int] = field(default_factory=dict)  # file name -> bytes
    format_version: int = FORMAT_VERSION
    # The engine measured against its float checkpoint (build_engines/fidelity: text, token
    # count, reference, host, PPL, KLD, top-1, greedy agreement, gate); {} when not measured.
    fidelity: dict[str, Any] = field(default_factory=dict)
    compression: dict[str, Any] = field(default_factory=dict)  # int4: NNCF recipe and version
    fusion: dict[str, Any] = field(default_factory=dict)  # CPU engine: fused projections (openvino/fusion.py)
    # CPU engine: each candidate numerics setting measured for accuracy and speed on the build host,
    # and the fast one chosen (build_engines/openvino/numerics.py); {} when not measured.
    numerics: dict[str, Any] = field(default_factory=dict)
    # How the checkpoint's chat template writes tool calls (contract/tool_formats.py), read at
    # build time as the chat template is; "" in records older than the field (the front detects).
    tool_call_format: str = ""

    def write(self, engine_dir: Path) -> Path:
        path = engine_dir / BUILD_RECORD_FILE
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        return path

    @classmethod
    def read(cls, engine_dir: Path) -> "BuildRecord":
        path = engine_dir / BUILD_RECORD_FILE
        if not path.is_file():
            raise BuildRecordError(
                f"{engine_dir} has no {BUILD_RECORD_FILE}: it was not built by build_engines (or the build did not "
                "finish)"
            )
        data = json.loads(path.read_text())
        if data.get("format_version") != FORMAT_VERSION:
            raise BuildRecordError(
                f"{path}: format_version {data.get('format_version')} is not {FORMAT_VERSION}; rebuild the engine"
            )
        return cls(**data)


def installed_versions(packages: tuple[str, ...]) -> dict[str, str]:
    versions = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def version_mismatches(record: BuildRecord, runtime: dict[str, str]) -> list[str]:
    """Human-readable differences between the build-time and the serving versions."""
    return [
        f"{pkg}: engine built with {record.versions.get(pkg, 'unknown')}, server has {runtime[pkg]}"
        for pkg in RUNTIME_PACKAGES[record.backend]
        if record.versions.get(pkg) != runtime.get(pkg)
    ]


def check_runtime(record: BuildRecord, runtime: dict[str, str] | None = None) -> None:
    runtime = runtime or installed_versions(RUNTIME_PACKAGES[record.backend])
    problems = version_mismatches(record, runtime)
    if problems:
        raise BuildRecordError(
            "engine/runtime version mismatch - rebuild the engine with this server's image/environment: "
            + "; ".join(problems)
        )
