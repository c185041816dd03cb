"""The spec's `fidelity` section: which evaluation a build runs and the gate it must pass."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from build_engines.fidelity.gate import FIDELITY_GATES, GateLimits

EVALUATIONS = ("quick", "full", "off")


@dataclass(frozen=True)
class FidelityOptions:
    evaluation: str = "quick"  # quick: every build (58 CPU-s here); full: the whole measurement; off: none
    # Gate overrides; None: the precision's default (build_engines/fidelity/gate.py).
    max_mean_kld: float | None = None
    max_ppl_change_pct: float | None = None
    min_same_top1_pct: float | None = None

    def validate(self) -> None:
        from build_engines.spec_base import SpecError

        if self.evaluation not in EVALUATIONS:
            raise SpecError(f"'fidelity.evaluation' must be one of {list(EVALUATIONS)}, got {self.evaluation!r}")
        for name in ("max_mean_kld", "max_ppl_change_pct", "min_same_top1_pct"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise SpecError(f"'fidelity.{name}' must be >= 0, got {value}")

    def limits(self, precision: str) -> GateLimits | None:
        """The gate for an engine of this weight precision (None: no default gate for it)."""
        base = FIDELITY_GATES.get(precision)
        overrides = {
            k: v
            for k, v in (
                ("max_mean_kld", self.max_mean_kld),
                ("max_ppl_change_pct", self.max_ppl_change_pct),
                ("min_same_top1_pct", self.min_same_top1_pct),
            )
            if v is not None
        }
        if base is None:
            if not overrides:
                return None
            base = GateLimits(max_mean_kld=float("inf"), max_ppl_change_pct=float("inf"), min_same_top1_pct=0.0)
        return replace(base, **overrides)


def fidelity_options_from_dict(data: dict[str, Any]) -> FidelityOptions:
    return FidelityOptions(**data)
