"""The Grafana dashboard of the serving stack, generated from the metric table in
contract/metrics.py (so a renamed metric cannot leave a dead panel).  `python -m deploy
dashboard` rewrites deploy/grafana/llm-serving.json; a test checks the file is current."""

from __future__ import annotations

import json
from pathlib import Path

from contract import metrics

DASHBOARD_FILE = Path(__file__).resolve().parent / "grafana" / "llm-serving.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _quantiles(spec: metrics.MetricSpec) -> list[tuple[str, str]]:
    return [
        (f"histogram_quantile({q}, sum by (le) (rate({spec.name}_bucket[1m])))", f"p{int(q * 100)}")
        for q in (0.5, 0.9, 0.99)
    ]


# NVIDIA DCGM exporter fields (NVIDIA/dcgm-exporter etc/default-counters.csv): GPU utilisation
# in percent, framebuffer memory used / free in MiB, per `gpu` label.
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"
DCGM_METRICS = (DCGM_GPU_UTIL, DCGM_FB_USED, DCGM_FB_FREE)

# (title, unit, [(PromQL, legend)]) - our engine metrics next to Triton's own, and the GPUs'.
PANELS = [
    ("Output tokens/s", "short", [(f"sum(rate({metrics.GENERATED_TOKENS.name}[1m]))", "tokens/s")]),
    (
        "Requests finished/s by outcome",
        "reqps",
        [(f"sum by (outcome) (rate({metrics.REQUESTS_FINISHED.name}[1m]))", "{{outcome}}")],
    ),
    ("Time to first token", "s", _quantiles(metrics.TIME_TO_FIRST_TOKEN)),
    ("Inter-token latency", "s", _quantiles(metrics.INTER_TOKEN_LATENCY)),
    ("Queue time", "s", _quantiles(metrics.QUEUE_TIME)),
    (
        "Running and waiting requests",
        "short",
        [
            (f"sum({metrics.REQUESTS_RUNNING.name})", "running"),
            (f"sum({metrics.REQUESTS_WAITING.name})", "waiting"),
            ("sum(nv_inference_pending_request_count)", "Triton queue"),
        ],
    ),
    (
        "KV-cache usage",
        "percentunit",
        [
            (f"max({metrics.KV_CACHE_USAGE.name})", "CPU engine"),
            ('max(nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="fraction"})', "TensorRT-LLM"),
        ],
    ),
    (
        "Prefix-cache hit rate (prompt tokens)",
        "percentunit",
        [
            (
                f"sum(rate({metrics.PREFIX_CACHE_HITS.name}[5m])) / sum(rate({metrics.PREFIX_CACHE_QUERIES.name}[5m]))",
                "CPU engine (estimated)",
            ),
            (
                'sum(rate(nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type="reused"}[5m]))',
                "TensorRT-LLM reused blocks/s",
            ),
        ],
    ),
    ("Detokenizer streams held", "short", [(f"sum({metrics.POSTPROCESSING_STREAMS.name})", "streams")]),
    ("GPU utilisation (DCGM)", "percent", [(f"avg by (Hostname, gpu) ({DCGM_GPU_UTIL})", "{{Hostname}} GPU {{gpu}}")]),
    (
        "GPU memory used (DCGM)",
        "percentunit",
        [
            (
                f"sum by (Hostname, gpu) ({DCGM_FB_USED}) / sum by (Hostname, gpu) ({DCGM_FB_USED} + {DCGM_FB_FREE})",
                "{{Hostname}} GPU {{gpu}}",
            )
        ],
    ),
    (
        "Triton requests/s by model",
        "reqps",
        [
            ("sum by (model) (rate(nv_inference_request_success[1m]))", "{{model}} ok"),
            ("sum by (model) (rate(nv_inference_request_failure[1m]))", "{{model}} failed"),
        ],
    ),
]


def dashboard() -> dict:
    panels = []
    for i, (title, unit, queries) in enumerate(PANELS):
        panels.append(
            {
                "id": i + 1,
                "type": "timeseries",
                "title": title,
                "datasource": DATASOURCE,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(65 + j), "expr": expr, "legendFormat": legend, "datasource": DATASOURCE}
                    for j, (expr, legend) in enumerate(queries)
                ],
            }
        )
    return {
        "uid": "llama-triton-serving",
        "title": "Llama on Triton - serving",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "5s",
        "time": {"from": "now-30m", "to": "now"},
        "tags": ["llm", "triton"],
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]
        },
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def write() -> Path:
    DASHBOARD_FILE.parent.mkdir(parents=True, exist_ok=True)
    DASHBOARD_FILE.write_text(render())
    return DASHBOARD_FILE
