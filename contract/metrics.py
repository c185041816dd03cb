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
TIME_TO_FIRST_TOKEN = MetricSpec(
    "llm_time_to_first_token_seconds", MetricKind.HISTOGRAM, "Engine arrival to first generated token", LATENCY_BUCKETS
)
INTER_TOKEN_LATENCY = MetricSpec(
    "llm_inter_token_latency_seconds", MetricKind.HISTOGRAM, "Time between consecutive tokens of a request", ITL_BUCKETS
)
QUEUE_TIME = MetricSpec(
    "llm_queue_time_seconds", MetricKind.HISTOGRAM, "Engine arrival to joining the running batch", LATENCY_BUCKETS
)
GENERATED_TOKENS = MetricSpec("llm_generated_tokens_total", MetricKind.COUNTER, "Tokens generated")
REQUESTS_FINISHED = MetricSpec(
    "llm_requests_finished_total",
    MetricKind.COUNTER,
    "Requests that left the engine, by outcome",
    labels=("model", "outcome"),
)

# Prompt tokens in whole KV blocks looked up in the prefix cache, and those found (vLLM's
# prefix_cache_queries / prefix_cache_hits, in tokens): hit rate = hits / queries.  On the CPU
# engine an estimate (model_repository/engine_step/prefix_hits.py).
PREFIX_CACHE_QUERIES = MetricSpec(
    "llm_prefix_cache_queries_total",
    MetricKind.COUNTER,
    "Prompt tokens (whole KV blocks) looked up in the prefix cache",
)
PREFIX_CACHE_HITS = MetricSpec(
    "llm_prefix_cache_hits_total",
    MetricKind.COUNTER,
    "Prompt tokens (whole KV blocks) the prefix cache held (CPU engine: estimated)",
)

POSTPROCESSING_STREAMS = MetricSpec(
    "llm_postprocessing_streams", MetricKind.GAUGE, "Streams whose detokenizer state postprocessing holds"
)

# What the launcher's supervisor did (serving/supervisor.py, contract/supervision.py): published
# by the server it (re)started, so they survive the restart they count.
SERVER_RESTARTS = MetricSpec(
    "kit_server_restarts_total",
    MetricKind.COUNTER,
    "Restarts of tritonserver by the launcher's supervisor, by reason",
    labels=("reason",),
)
WEDGES = MetricSpec(
    "kit_wedges_total",
    MetricKind.COUNTER,
    "Entries (entry models, the OpenAI front) found wedged by the canary",
    labels=("entry",),
)
SUPERVISION_METRICS = (SERVER_RESTARTS, WEDGES)

ENGINE_METRICS = (
    REQUESTS_RUNNING,
    REQUESTS_WAITING,
    KV_CACHE_USAGE,
    TIME_TO_FIRST_TOKEN,
    INTER_TOKEN_LATENCY,
    QUEUE_TIME,
    GENERATED_TOKENS,
    REQUESTS_FINISHED,
)
PREFIX_CACHE_METRICS = (PREFIX_CACHE_QUERIES, PREFIX_CACHE_HITS)  # engines that cache prefixes and count hits
POSTPROCESSING_METRICS = (POSTPROCESSING_STREAMS,)


# Standard-named aliases of our engine gauges: the names Triton's TensorRT-LLM C++ backend
# exports, which the Gateway API Inference Extension's endpoint picker reads for the engine
# type "triton-tensorrt-llm" (kubernetes-sigs/gateway-api-inference-extension v1.5.0,
# pkg/epp/framework/plugins/datalayer/extractor/metrics/factories.go, defaultEngineConfigs;
# docs/proposals/003-model-server-protocol/README.md).  The CPU and PyTorch-backend engines
# publish them beside ours, so one picker configuration serves every engine of the kit.
TRTLLM_REQUEST_METRICS = MetricSpec(
    "nv_trt_llm_request_metrics",
    MetricKind.GAUGE,
    "Alias of llm_requests_*: TensorRT-LLM backend request counts by type",
    labels=("model", "request_type"),
)
TRTLLM_KV_CACHE_BLOCK_METRICS = MetricSpec(
    "nv_trt_llm_kv_cache_block_metrics",
    MetricKind.GAUGE,
    "Alias of llm_kv_cache_usage_ratio: TensorRT-LLM backend KV-cache block metrics",
    labels=("model", "kv_cache_block_type"),
)


@dataclass(frozen=True)
class Alias:
    spec: MetricSpec  # the standard family
    label: str
    value: str

    @property
    def selector(self) -> str:
        """The picker's metric specification, e.g. nv_trt_llm_request_metrics{request_type=waiting}."""
        return f"{self.spec.name}{{{self.label}={self.value}}}"


# our gauge -> its standard-named alias (TotalQueuedRequests, TotalRunningRequests, KVCacheUtilization)
GAUGE_ALIASES = {
    REQUESTS_WAITING.name: Alias(TRTLLM_REQUEST_METRICS, "request_type", "waiting"),
    REQUESTS_RUNNING.name: Alias(TRTLLM_REQUEST_METRICS, "request_type", "scheduled"),
    KV_CACHE_USAGE.name: Alias(TRTLLM_KV_CACHE_BLOCK_METRICS, "kv_cache_block_type", "fraction"),
}
ALIAS_METRICS = (TRTLLM_REQUEST_METRICS, TRTLLM_KV_CACHE_BLOCK_METRICS)
