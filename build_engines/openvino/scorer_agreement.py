"""What the build measured of the IR scorer's agreement with the pipeline under one numerics
setting (build_engines/fidelity/logprob_agreement.py measures it; build.json keeps it): whether
the top_logprobs the scorer serves describe the tokens the pipeline sampled, which the served
numerics read (build_engines/openvino/numerics.py top_logprobs_problem)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# Nats: f32 kernels over the same weights differ by summation order only (measured well below it).
LOGPROB_TOLERANCE = 2e-3


@dataclass(frozen=True)
class LogprobAgreement:
    positions: int
    top1_mismatches: int  # the greedy token was not the scorer's most likely one (ties within tolerance aside)
    max_gap: float  # nats: |pipeline's log prob - scorer's| of the greedy token, the largest

    @property
    def agrees(self) -> bool:
        return self.positions > 0 and self.top1_mismatches == 0 and self.max_gap <= LOGPROB_TOLERANCE

    def describe(self) -> str:
        return (
            f"greedy token not the scorer's top-1 at {self.top1_mismatches} of {self.positions} positions, "
            f"its log probs up to {self.max_gap:.4f} nats apart (tolerance {LOGPROB_TOLERANCE})"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"agrees": self.agrees}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LogprobAgreement":
        return cls(
            positions=int(data["positions"]),
            top1_mismatches=int(data["top1_mismatches"]),
            max_gap=float(data["max_gap"]),
        )
