"""How many GPUs (MPI ranks) one server replica needs: the engine's tensor x pipeline parallel
sizes, read from build.json's `spec`.

The one place that knows where the spec keeps them.  Specs without them (CPU engines, engines
built before TP/PP existed) mean one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from contract.build_record import BuildRecord

# Accepted spellings, at the top of the spec or one level down (e.g. spec["tensorrt_llm"]).
TP_KEYS = ("tp_size", "tensor_parallel_size")
PP_KEYS = ("pp_size", "pipeline_parallel_size")


class ParallelismError(ValueError):
    pass


@dataclass(frozen=True)
class Parallelism:
    tensor: int = 1
    pipeline: int = 1

    @property
    def world_size(self) -> int:
        return self.tensor * self.pipeline


def parallelism_from_spec(spec: Mapping[str, Any]) -> Parallelism:
    return Parallelism(tensor=_size(spec, TP_KEYS), pipeline=_size(spec, PP_KEYS))


def engine_parallelism(engine_dir: Path) -> Parallelism:
    return parallelism_from_spec(BuildRecord.read(engine_dir).spec)


def _size(spec: Mapping[str, Any], keys: tuple[str, ...]) -> int:
    found = {
        f"{where}{key}": value
        for where, section in _sections(spec)
        for key, value in section.items()
        if key in keys and value is not None
    }
    if not found:
        return 1
    if len(set(map(repr, found.values()))) > 1:
        raise ParallelismError(f"build.json spec disagrees with itself: {found}")
    where, value = next(iter(found.items()))
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParallelismError(f"build.json spec '{where}' must be an integer >= 1, got {value!r}")
    return value


def _sections(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    nested = [(f"{name}.", value) for name, value in spec.items() if isinstance(value, Mapping)]
    return [("", spec), *nested]
