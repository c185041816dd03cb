"""An engine directory is written under `<name>.partial` and renamed into place only when
complete, with its build.json, so a half-built engine never looks usable."""

from __future__ import annotations

import datetime
import shutil
import time
from pathlib import Path

from build_engines.checkpoint import CheckpointInfo, inspect_checkpoint
from build_engines.process import BuildError
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend
from contract import tool_formats
from contract.build_record import BuildRecord


def validated_checkpoint(spec: BuildSpec, backend: EngineBackend) -> CheckpointInfo:
    """The checkpoint's facts, once the spec is known to be this builder's and valid for them."""
    if spec.backend != backend:
        raise BuildError(f"the {backend.value} builder got a {spec.backend.value!r} spec")
    info = inspect_checkpoint(spec.checkpoint)
    spec.validate(info)
    return info


def staging_dir(engine_dir: Path) -> Path:
    """A fresh, empty `<engine>.partial` beside the engine directory."""
    staging = engine_dir.with_name(engine_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    engine_dir.parent.mkdir(parents=True, exist_ok=True)
    return staging


def tool_call_format(engine_dir: Path) -> str:
    """The tool-call format of the chat template the engine directory carries (beside the engine,
    or in the subdirectory a GPU flow keeps the tokenizer in)."""
    for directory in (engine_dir, *sorted(p for p in engine_dir.iterdir() if p.is_dir())):
        template = tool_formats.read_chat_template(directory)
        if template is not None:
            return tool_formats.detect(template)
    return tool_formats.detect(None)


def finish_engine(
    staging: Path,
    engine_dir: Path,
    spec: BuildSpec,
    info: CheckpointInfo,
    digest: str,
    versions: dict[str, str],
    started: float,
) -> BuildRecord:
    """Write build.json into the staging directory, then swap it in for `engine_dir`."""
    record = BuildRecord(
        backend=spec.backend.value,
        spec=spec.to_dict(),
        checkpoint=info.to_dict() | {"hash": digest},
        versions=versions,
        built_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        build_seconds=round(time.monotonic() - started, 1),
        artifacts={str(p.relative_to(staging)): p.stat().st_size for p in sorted(staging.rglob("*")) if p.is_file()},
        tool_call_format=tool_call_format(staging),
    )
    record.write(staging)
    if engine_dir.exists():
        shutil.rmtree(engine_dir)
    staging.rename(engine_dir)
    return record
