import json
import re

from contract import metrics
from deploy.dashboard import DASHBOARD_FILE, DCGM_METRICS, render

TRITON_METRICS = {"nv_inference_pending_request_count", "nv_inference_request_success", "nv_inference_request_failure",
                  "nv_trt_llm_kv_cache_block_metrics"}


def test_committed_dashboard_is_current():
    assert DASHBOARD_FILE.read_text() == render(), "run: python -m deploy dashboard"


def test_every_query_reads_a_metric_that_exists():
    ours = {m.name for m in metrics.ENGINE_METRICS + metrics.PREFIX_CACHE_METRICS + metrics.POSTPROCESSING_METRICS}
    known = ours | {f"{m.name}_bucket" for m in ours_specs()} | TRITON_METRICS | set(DCGM_METRICS)
    panels = json.loads(DASHBOARD_FILE.read_text())["panels"]
    used = set()
    for panel in panels:
        for target in panel["targets"]:
            names = set(re.findall(r"\b(llm_\w+|nv_\w+|DCGM_\w+)", target["expr"]))
            assert names and names <= known, (panel["title"], names - known)
            used |= names
    assert {m.name for m in (metrics.TIME_TO_FIRST_TOKEN, metrics.INTER_TOKEN_LATENCY)} <= {n.removesuffix("_bucket") for n in used}


def ours_specs():
    return [m for m in metrics.ENGINE_METRICS if m.kind == metrics.MetricKind.HISTOGRAM]
