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


@dataclass(frozen=True)
class PublishedFigure:
    """A throughput NVIDIA publishes for TensorRT-LLM (trtllm-bench, offline, maximum load: no SLO)."""

    model: str
    gpu: str
    tp: int
    precision: str
    isl_osl: str
    output_tok_s: float


# NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md, "Llama 3.1 8B" table, read at commit
# 00f37686aa854010d68bcbd0f4ab000221541ca6 (the stored version; its release tag not read): Total
# Output Throughput (tokens/sec), trtllm-bench throughput on the PyTorch backend, nvidia/Llama-3.1-8B-Instruct-FP8.
PUBLISHED_SOURCE = "NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md @ 00f37686"
NVIDIA_PUBLISHED = (
    PublishedFigure("Llama-3.1-8B-Instruct-FP8", "H100 SXM 80GB", 1, "FP8", "128/128", 28312),
    PublishedFigure("Llama-3.1-8B-Instruct-FP8", "H100 SXM 80GB", 1, "FP8", "1000/1000", 15220),
    PublishedFigure("Llama-3.1-8B-Instruct-FP8", "H200 SXM 141GB", 1, "FP8", "128/128", 27911),
    PublishedFigure("Llama-3.1-8B-Instruct-FP8", "H200 SXM 141GB", 1, "FP8", "1000/1000", 17744),
)


def cost_comparison(
    results: Sequence[RunResult], pricing: Pricing | None, gpu_hour_usd: float | None, model: str, machine: str
) -> list[str]:
    """$/1M output tokens side by side: this run (at its SLO-meeting load, and its best load) at the
    given instance price, and NVIDIA's published GPU figures at the given GPU-hour price.  A price
    not given leaves its cost out (the throughput stays)."""
    best = max((r for r in results if r.output_tokens_per_s > 0), key=lambda r: r.output_tokens_per_s, default=None)
    meeting = slo_meeting_run(results)
    lines = [
        "| what | measured where | load | output tok/s | price per hour | $/1M output tokens |",
        "|---|---|---|---:|---:|---:|",
    ]
    for label, run in (("this run, SLO-meeting load", meeting), ("this run, highest throughput", best)):
        if run is None:
            continue
        usd = usd_per_million(run.output_tokens_per_s, pricing) if pricing else None
        price = f"${pricing.replica_hour_usd:.4g}" if pricing else "-"
        lines.append(
            f"| {model}, {label} | {machine} | {run.load} | {run.output_tokens_per_s:.0f} | {price} | {fmt(usd)} |"
        )
    for f in NVIDIA_PUBLISHED:
        usd = None if gpu_hour_usd is None else usd_per_million(f.output_tok_s, Pricing(gpu_hour_usd * f.tp))
        price = "-" if gpu_hour_usd is None else f"${gpu_hour_usd:.4g} x {f.tp} GPU"
        lines.append(
            f"| {f.model} (NVIDIA, published) | {f.gpu} TP{f.tp} {f.precision} | ISL/OSL {f.isl_osl}, offline max | "
            f"{f.output_tok_s:,.0f} | {price} | {fmt(usd)} |"
        )
    lines += [
        "",
        f"NVIDIA's figures: {PUBLISHED_SOURCE}, offline maximum throughput with no latency SLO (trtllm-bench), on "
        "another model and hardware; ours are served through Triton and the OpenAI front.  Prices are the ones "
        "given to this run (--price-per-hour, --gpu-price-per-hour), not looked up.",
    ]
    return lines
