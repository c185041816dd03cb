"""SLO alerts as code: one table of Prometheus alerting rules, rendered into one rules file
(deploy/helm/llama-triton/files/llm-alerts.rules.yaml) that both the chart's PrometheusRule
(`.Files.Get`) and the compose `metrics` profile's Prometheus (a bind mount) load.
`python -m deploy alerts` rewrites it; a unit test checks the committed file is current and
`promtool test rules` (tests/promtool/) checks every alert firing and not firing.

Metric names come from contract/metrics.py (our engines) and Triton's own families; the
queue and KV-cache rules also read TensorRT-LLM's C++ backend gauges, so they hold for every
engine the kit serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from contract import metrics

RULES_FILE = Path(__file__).resolve().parent / "helm" / "llama-triton" / "files" / "llm-alerts.rules.yaml"
GROUP = "llama-triton-slo"
# The scrape job of Triton's metrics port: docker/prometheus.yml's job_name, and the job the
# chart's ServiceMonitor relabels its targets to.
SCRAPE_JOB = "triton"
# TensorRT-LLM C++ backend gauges (tensorrtllm_backend docs/model_config.md, "Triton metrics").
TRTLLM_WAITING = 'nv_trt_llm_request_metrics{request_type="waiting"}'
TRTLLM_KV_FRACTION = 'nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"}'


@dataclass(frozen=True)
class Slo:
    """The objectives the alerts guard (the bench's goodput SLO uses the same defaults)."""

    ttft_p99_s: float = 1.0
    itl_p99_s: float = 0.06
    queue_depth: int = 8  # waiting requests per replica before growth alerts
    kv_cache_ratio: float = 0.9
    error_ratio: float = 0.05
    window: str = "5m"


@dataclass(frozen=True)
class AlertRule:
    name: str
    expr: str
    for_: str
    severity: str  # "page" | "ticket"
    summary: str
    description: str

    def to_dict(self) -> dict:
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {"summary": self.summary, "description": self.description},
        }


def _p99(spec: metrics.MetricSpec, window: str) -> str:
    return f"histogram_quantile(0.99, sum by (instance, model, le) (rate({spec.name}_bucket[{window}])))"


def rules(slo: Slo = Slo()) -> tuple[AlertRule, ...]:
    w = slo.window
    waiting = f"max by (instance) ({metrics.REQUESTS_WAITING.name} or {TRTLLM_WAITING})"
    kv = f"max by (instance) ({metrics.KV_CACHE_USAGE.name} or {TRTLLM_KV_FRACTION})"
    failed = f"sum by (instance, model) (rate(nv_inference_request_failure[{w}]))"
    succeeded = f"sum by (instance, model) (rate(nv_inference_request_success[{w}]))"
    return (
        AlertRule(
            "LLMTimeToFirstTokenP99High",
            f"{_p99(metrics.TIME_TO_FIRST_TOKEN, w)} > {slo.ttft_p99_s}",
            "5m",
            "page",
            "TTFT p99 over the SLO",
            f"{{{{ $labels.instance }}}}: p99 time to first token is {{{{ $value | humanizeDuration }}}} "
            f"(SLO {slo.ttft_p99_s} s) over {w}.",
        ),
        AlertRule(
            "LLMInterTokenLatencyP99High",
            f"{_p99(metrics.INTER_TOKEN_LATENCY, w)} > {slo.itl_p99_s}",
            "5m",
            "page",
            "Inter-token latency p99 over the SLO",
            f"{{{{ $labels.instance }}}}: p99 inter-token latency is {{{{ $value | humanizeDuration }}}} "
            f"(SLO {slo.itl_p99_s} s) over {w}.",
        ),
        AlertRule(
            "LLMQueueGrowing",
            f"{waiting} > {slo.queue_depth} and deriv({waiting}[{w}:30s]) > 0",
            "10m",
            "ticket",
            "Requests queue up faster than the replica serves them",
            f"{{{{ $labels.instance }}}}: {{{{ $value }}}} requests waiting and rising for 10 minutes "
            f"(threshold {slo.queue_depth}): add replicas.",
        ),
        AlertRule(
            "LLMKVCacheNearlyFull",
            f"{kv} > {slo.kv_cache_ratio}",
            "5m",
            "ticket",
            f"KV-cache utilisation over {slo.kv_cache_ratio:.0%}",
            "{{ $labels.instance }}: KV cache {{ $value | humanizePercentage }} full: new requests "
            "wait for blocks or get evicted.",
        ),
        AlertRule(
            "LLMErrorRatioHigh",
            f"{failed} / ({succeeded} + {failed}) > {slo.error_ratio}",
            "5m",
            "page",
            f"More than {slo.error_ratio:.0%} of requests fail",
            f"{{{{ $labels.instance }}}} model {{{{ $labels.model }}}}: {{{{ $value | humanizePercentage }}}} "
            f"of requests failed over {w}.",
        ),
        AlertRule(
            "LLMReplicaNotReady",
            f'up{{job="{SCRAPE_JOB}"}} == 0',
            "2m",
            "page",
            "A Triton replica does not answer its metrics scrape",
            "{{ $labels.instance }} has been down or unreachable for 2 minutes.",
        ),
    )


def rules_document(slo: Slo = Slo()) -> dict:
    return {"groups": [{"name": GROUP, "rules": [r.to_dict() for r in rules(slo)]}]}


def render(slo: Slo = Slo()) -> str:
    header = "# Generated by `python -m deploy alerts` from deploy/alerts.py: do not edit.\n"
    return header + yaml.safe_dump(rules_document(slo), sort_keys=False, width=1000)


def write() -> Path:
    RULES_FILE.parent.mkdir(parents=True, exist_ok=True)
    RULES_FILE.write_text(render())
    return RULES_FILE
