"""Cost per token: what one replica costs an hour, divided by the output tokens it produced in
that hour, at each measured load level and at the SLO-meeting load.

A replica uses `gpus_per_replica` of an instance's `gpus_per_instance` GPUs, so it costs that
share of the instance-hour (an 8-GPU instance serving TP=2 replicas runs four of them).
"Good" tokens are those of requests that met the TTFT and ITL SLO (goodput); their cost is
what a capacity plan should use, since tokens delivered late are not worth selling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from bench.genai_perf import RunResult

PER_TOKENS = 1_000_000
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class Pricing:
    instance_hour_usd: float
    gpus_per_replica: int = 1
    gpus_per_instance: int = 1

    def __post_init__(self) -> None:
        if self.instance_hour_usd < 0:
            raise ValueError(f"instance_hour_usd must be >= 0, got {self.instance_hour_usd}")
        if not 1 <= self.gpus_per_replica <= self.gpus_per_instance:
            raise ValueError(
                f"gpus_per_replica ({self.gpus_per_replica}) must be between 1 and gpus_per_instance "
                f"({self.gpus_per_instance}): a replica runs on one instance"
            )

    @property
    def replica_hour_usd(self) -> float:
        return self.instance_hour_usd * self.gpus_per_replica / self.gpus_per_instance


@dataclass(frozen=True)
class RunCost:
    load: str
    usd_per_m_output: float | None  # None when the run produced no tokens
    usd_per_m_good_output: float | None  # per million tokens of requests within the SLO


def usd_per_million(tokens_per_s: float, pricing: Pricing) -> float | None:
    if tokens_per_s <= 0:
        return None
    return pricing.replica_hour_usd / (tokens_per_s * SECONDS_PER_HOUR) * PER_TOKENS


def run_cost(result: RunResult, pricing: Pricing) -> RunCost:
    good_tokens_per_s = result.output_tokens_per_s * result.slo_met_fraction
    return RunCost(
        result.load, usd_per_million(result.output_tokens_per_s, pricing), usd_per_million(good_tokens_per_s, pricing)
    )


def slo_meeting_run(results: Sequence[RunResult], attainment: float = 0.9) -> RunResult | None:
    """The highest-throughput run in which at least `attainment` of the requests met the SLO."""
    meeting = [r for r in results if r.slo_met_fraction >= attainment and r.output_tokens_per_s > 0]
    return max(meeting, key=lambda r: r.output_tokens_per_s, default=None)


def summary_line(results: Sequence[RunResult], pricing: Pricing, attainment: float = 0.9) -> str:
    best = slo_meeting_run(results, attainment)
    share = (
        f"{pricing.gpus_per_replica} of {pricing.gpus_per_instance} GPUs of a ${pricing.instance_hour_usd:g}/h "
        f"instance = ${pricing.replica_hour_usd:.4g} per replica-hour"
    )
    if best is None:
        return f"cost: no load level met the SLO for {attainment:.0%} of requests ({share})"
    cost = usd_per_million(best.output_tokens_per_s, pricing)
    return (
        f"cost at the SLO-meeting load ({best.load}, {best.slo_met_fraction:.0%} of requests within the SLO, "
        f"{best.output_tokens_per_s:.0f} output tok/s): **${cost:.4g} per 1M output tokens** ({share})"
    )


def fmt(usd: float | None) -> str:
    return "-" if usd is None else f"{usd:.4g}"
