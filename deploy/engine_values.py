"""The chart values an engine dictates, from its build.json: how many GPUs (MPI ranks) a
replica gets.  `python -m deploy values --engine-dir <dir>` writes them as a values file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from build_engines.spec_base import EngineBackend
from contract.build_record import BuildRecord
from deploy.parallelism import parallelism_from_spec


class EngineValuesError(ValueError):
    pass


def engine_values(engine_dir: Path) -> dict[str, Any]:
    record = BuildRecord.read(engine_dir)
    if record.backend != EngineBackend.TENSORRT_LLM.value:
        raise EngineValuesError(
            f"{engine_dir} holds a {record.backend!r} engine; the chart serves "
            f"{EngineBackend.TENSORRT_LLM.value!r} engines with the NGC image"
        )
    sizes = parallelism_from_spec(record.spec)
    return {"engine": {"tensorParallelSize": sizes.tensor, "pipelineParallelSize": sizes.pipeline}}
