"""Which Triton image, and so which TensorRT-LLM version, a TensorRT-LLM build targets.

One place decides: `--image`/`--trtllm-version` on the command line, else the environment
(docker/gpu.Dockerfile sets TRITON_IMAGE and TRTLLM_VERSION inside the image, compose passes
them from .env), else the repository's .env.  The pairing of a Triton release with its
TensorRT-LLM version comes from the conformance tables (contract/upstream/data), never from
a literal here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from contract.upstream.citation import UpstreamTableError
from contract.upstream.trtllm_build import (
    ImagePin,
    TrtllmBuildTable,
    load_build_table,
    supported_versions,
    version_of_release,
)

ENV_FILE = Path(__file__).resolve().parents[2] / ".env"
IMAGE_VARIABLE = "TRITON_IMAGE"
VERSION_VARIABLE = "TRTLLM_VERSION"
_RELEASE = re.compile(r"(?:^|:)(\d{2}\.\d{2})(?:-|$)")  # 25.12, ...:25.12-trtllm-python-py3


class TrtllmTargetError(ValueError):
    pass


@dataclass(frozen=True)
class TrtllmTarget:
    release: str  # Triton release, e.g. "25.12"
    version: str  # TensorRT-LLM version it ships, e.g. "1.1.0"

    @property
    def table(self) -> TrtllmBuildTable:
        return load_build_table(self.version)

    @property
    def image(self) -> ImagePin:
        return self.table.image(self.release)


def release_of_image(image: str) -> str:
    match = _RELEASE.search(image.strip())
    if not match:
        raise TrtllmTargetError(
            f"'image' {image!r} names no Triton release (expected e.g. 26.07 or "
            "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3)"
        )
    return match.group(1)


def read_env_file(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


def resolve_target(
    image: str | None = None,
    version: str | None = None,
    environ: dict[str, str] | None = None,
    env_file: Path = ENV_FILE,
) -> TrtllmTarget:
    """The target named on the command line, else by the environment, else by .env."""
    if image is None and version is None:
        settings = read_env_file(env_file) | dict(os.environ if environ is None else environ)
        image, version = settings.get(IMAGE_VARIABLE), settings.get(VERSION_VARIABLE)
        where = f"{IMAGE_VARIABLE}/{VERSION_VARIABLE} (environment or {env_file.name})"
        if image is None and version is None:
            raise TrtllmTargetError(
                f"no TensorRT-LLM target: give --image or --trtllm-version, or set {where}; "
                f"supported versions: {supported_versions()}"
            )
    else:
        where = "--image/--trtllm-version"
    try:
        if image is not None:
            release = release_of_image(image)
            shipped = version_of_release(release)
            if version is not None and version != shipped:
                raise TrtllmTargetError(f"{where}: Triton {release} ships TensorRT-LLM {shipped}, not {version}")
            return TrtllmTarget(release, shipped)
        assert version is not None  # neither given was refused above
        return TrtllmTarget(load_build_table(version).newest_image.release, version)
    except UpstreamTableError as e:
        raise TrtllmTargetError(f"{where}: {e}") from None


def default_target() -> TrtllmTarget | None:
    """The configured target, or None where nothing names one (e.g. the CPU image)."""
    try:
        return resolve_target()
    except TrtllmTargetError:
        return None
