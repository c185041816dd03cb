"""Prometheus metrics our engine models export next to Triton's own (one definition, used
by the models, the dashboards, the autoscaler rules and the tests)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class MetricKind(enum.Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: MetricKind
    help: str
    buckets: tuple[float, ...] = ()
    labels: tuple[str, ...] = ("model",)


LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ITL_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56)

REQUESTS_RUNNING = MetricSpec("llm_requests_running", MetricKind.GAUGE, "Requests in the engine's running batch")
REQUESTS_WAITING = MetricSpec("llm_requests_waiting", MetricKind.GAUGE, "Requests received, not yet in the batch")
KV_CACHE_USAGE = MetricSpec("llm_kv_cache_usage_ratio", MetricKind.GAUGE, "Fraction of the KV-cache pool in use")
TIME_TO_FIRST_TOKEN = MetricSpec("llm_time_to_first_token_seconds", MetricKind.HISTOGRAM,
                                 "Engine arrival to first generated token", LATENCY_BUCKETS)
INTER_TOKEN_LATENCY = MetricSpec("llm_inter_token_latency_seconds", MetricKind.HISTOGRAM,
                                 "Time between consecutive tokens of a request", ITL_BUCKETS)
QUEUE_TIME = MetricSpec("llm_queue_time_seconds", MetricKind.HISTOGRAM,
                        "Engine arrival to joining the running batch", LATENCY_BUCKETS)
GENERATED_TOKENS = MetricSpec("llm_generated_tokens_total", MetricKind.COUNTER, "Tokens generated")
REQUESTS_FINISHED = MetricSpec("llm_requests_finished_total", MetricKind.COUNTER,
                               "Requests that left the engine, by outcome", labels=("model", "outcome"))

POSTPROCESSING_STREAMS = MetricSpec("llm_postprocessing_streams", MetricKind.GAUGE,
                                    "Streams whose detokenizer state postprocessing holds")

ENGINE_METRICS = (REQUESTS_RUNNING, REQUESTS_WAITING, KV_CACHE_USAGE, TIME_TO_FIRST_TOKEN, INTER_TOKEN_LATENCY,
                  QUEUE_TIME, GENERATED_TOKENS, REQUESTS_FINISHED)
POSTPROCESSING_METRICS = (POSTPROCESSING_STREAMS,)
