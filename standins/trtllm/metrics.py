"""The C++ backend's custom metrics (CustomMetricsReporter), from the table's metric rows.

Upstream's stats thread turns each executor iteration's stats into a JSON object keyed by
names such as "Active Request Count" (WaitForStats), and the reporter sets, per family, the
metric of every key it finds (UpdateCustomMetrics).  The stand-in builds the same keys from
its executor and engine, and maps them through the same rows, so names, labels and label
values cannot drift from the table.  Families whose values the stand-in has no honest source
for (runtime memory, disaggregated serving) are not published.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

from contract.upstream.backend_semantics import BackendSemantics
from standins.trtllm.engine import SequenceStats
from standins.trtllm.executor import ExecutorStats

PUBLISHED = ("metric.request", "metric.kv_cache", "metric.inflight_batcher", "metric.general", "metric.token_len")


@dataclass(frozen=True)
class Series:
    """One metric: a family, its category label and that label's value."""

    family: str
    description: str
    kind: str  # gauge | counter | histogram
    category: str
    label: str
    key: str  # the stats JSON key that feeds it
    buckets: tuple[float, ...] = ()


def series(sem: BackendSemantics, rule_ids: tuple[str, ...] = PUBLISHED) -> list[Series]:
    out = []
    for rule_id in rule_ids:
        row = sem.rule(rule_id).extra
        buckets = tuple(row.get("buckets", ()))
        if "families" in row:  # one family per key (row metric.token_len)
            out += [Series(family, f["description"], row["kind"], row["category"], f["label"], f["key"], buckets)
                    for family, f in row["families"].items()]
        else:
            out += [Series(row["family"], row["description"], row["kind"], row["category"], label, key, buckets)
                    for label, key in row["labels"].items()]
    return out


def labels(model: str, version: str, s: Series) -> dict[str, str]:
    """Row metric.labels: model and version, plus the family's category."""
    return {"model": model, "version": version, s.category: s.label}


def iteration_stats(executor: ExecutorStats, engine: SequenceStats, *, scheduled: int, iteration: int,
                    now_s: float | None = None) -> dict[str, float]:
    """The keys of upstream's WaitForStats JSON (rows metric.request, metric.kv_cache,
    metric.inflight_batcher, metric.general), from the stand-in's executor and engine.
    `scheduled`: sequences the engine's last step scheduled (OpenVINO's pipeline metrics)."""
    scheduled = min(max(scheduled, 0), executor.active)
    free = max(engine.max_blocks - engine.used_blocks, 0)
    now_s = time.time() if now_s is None else now_s
    return {
        "Active Request Count": executor.active,
        "Max Request Count": executor.max_active,
        "Scheduled Requests": scheduled,
        "Context Requests": engine.in_context,
        "Waiting Requests": executor.active - scheduled,
        "Generation Requests": max(scheduled - engine.in_context, 0),
        "MicroBatch ID": 0,
        "Paused Requests": 0,
        "Total Context Tokens": engine.context_tokens,
        "Iteration Counter": iteration,
        "Timestamp": int(now_s * 1e6),  # upstream converts its timestamp string to microseconds
        "Max KV cache blocks": engine.max_blocks,
        "Free KV cache blocks": free,
        "Used KV cache blocks": engine.used_blocks,
        "Tokens per KV cache block": engine.tokens_per_block,
        "Reused KV cache blocks": 0,  # the stand-in models no block reuse
        "Fraction used KV cache blocks": engine.used_blocks / engine.max_blocks if engine.max_blocks > 0 else 0.0,
    }


def updates(all_series: list[Series], stats: Mapping[str, float]) -> list[tuple[Series, float]]:
    """UpdateCustomMetrics: every series whose key the stats carry gets that value."""
    return [(s, float(stats[s.key])) for s in all_series if s.key in stats]
