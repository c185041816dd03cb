"""The fast numerics decision measured once per kind of host, reused by later builds that match.

What `fast` chooses (build_engines/openvino/numerics.py) depends on which kernels the CPU runs
(the instruction set OpenVINO's oneDNN kernels dispatch on), its core count, the engine's
version, the weights and their precision: not on anything a second build of the same model on the
same kind of host would change.  Measuring every candidate's speed takes most of a first build
(225 s of a 6.5-minute first `make demo` on a 2-core Xeon), so a decision measured on a host kind
is recorded here (numerics_decisions.json) and a build whose key matches reuses it: it still
measures, on its own host, the fidelity of the reused setting and of exact (the gate holds as
before) and whether top_logprobs agree with the sampled tokens under it, and falls back to the
whole sweep when the reused setting fails the gate or is not applied here.  `--numerics-decision
measure` always sweeps; build.json's `numerics.chosen_by` says which path chose and when the
choice was measured."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from build_engines.openvino.numerics import Numerics

DECISIONS_FILE = Path(__file__).with_name("numerics_decisions.json")


class DecisionSource(str, enum.Enum):
    AUTO = "auto"  # a recorded decision when one matches, else measure
    MEASURE = "measure"  # always the whole sweep


DECISION_SOURCES = tuple(s.value for s in DecisionSource)


def isa_level(cpu_flags: list[str]) -> str:
    """The highest of oneDNN's CPU instruction-set levels (its cpu_isa_t: avx2, avx2_vnni,
    avx512_core, avx512_core_vnni, avx512_core_bf16, avx512_core_amx) the flags show."""
    flags = set(cpu_flags)
    if {"amx_int8", "amx_bf16"} <= flags:
        return "avx512_core_amx"
    if "avx512_bf16" in flags and "avx512_vnni" in flags:
        return "avx512_core_bf16"
    if "avx512_vnni" in flags:
        return "avx512_core_vnni"
    if "avx512f" in flags:
        return "avx512_core"
    if "avx_vnni" in flags:
        return "avx2_vnni"
    return "avx2" if "avx2" in flags else "below_avx2"


@dataclass(frozen=True)
class DecisionKey:
    checkpoint_hash: str  # build.json's checkpoint hash (config, tokenizer, weights)
    precision: str  # weights
    kv_cache_precision: str  # the spec's (f32 unless given by hand)
    openvino: str  # the engine's version (openvino-genai)
    isa: str  # isa_level()
    vendor: str  # /proc/cpuinfo vendor_id: one instruction set runs at other speeds on AMD's and Intel's cores
    cores: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecisionKey":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class RecordedDecision:
    key: DecisionKey
    fast: Numerics
    why: str  # the measuring build's reason
    measured: str  # date
    host: str  # the CPU it was measured on
    source: str  # where the measurement is written up (a docs/results page)

    def describe(self) -> str:
        return (
            f"recorded decision measured {self.measured} on {self.host} ({self.key.isa}, {self.key.cores} cores; "
            f"{self.source}): {self.why}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key.__dict__,
            "fast": self.fast.to_dict(),
            "why": self.why,
            "measured": self.measured,
            "host": self.host,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RecordedDecision":
        return cls(
            DecisionKey.from_dict(data["key"]),
            Numerics.from_dict(data["fast"]),
            data["why"],
            data["measured"],
            data["host"],
            data["source"],
        )


def recorded_decisions(path: Path = DECISIONS_FILE) -> list[RecordedDecision]:
    if not path.is_file():
        return []
    return [RecordedDecision.from_dict(d) for d in json.loads(path.read_text())["decisions"]]


def matching_decision(key: DecisionKey, decisions: list[RecordedDecision]) -> RecordedDecision | None:
    return next((d for d in decisions if d.key == key), None)
