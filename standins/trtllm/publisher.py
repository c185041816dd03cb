"""Publishes the stand-in's nv_trt_llm_* metrics through the Python backend's custom-metrics
API (Triton's /metrics), every stats_check_period_ms like upstream's stats thread.  Imports no
Triton: the adapter (model.py, the one module here that imports triton_python_backend_utils)
hands in pb_utils.MetricFamily, so this runs, and is tested, without a stub."""

from __future__ import annotations

import threading
from typing import Callable

from model_repository.engine_step.periodic import Periodic
from standins.trtllm.metrics import Series, labels, updates

_KINDS = {"gauge": "GAUGE", "counter": "COUNTER", "histogram": "HISTOGRAM"}
TOTAL_INPUT, TOTAL_OUTPUT = "Total Input Tokens", "Total Output Tokens"  # row metric.token_len keys


class StandinMetricsPublisher:
    def __init__(self, metric_family, model: str, version: str, all_series: list[Series], snapshot: Callable[[], dict],
                 period_s: float) -> None:
        """metric_family: pb_utils.MetricFamily (its kinds are attributes: GAUGE, COUNTER, HISTOGRAM)."""
        self._snapshot = snapshot
        self._series = all_series
        families: dict[str, object] = {}
        self._metrics: dict[Series, object] = {}
        for s in all_series:
            if s.family not in families:
                kind = getattr(metric_family, _KINDS[s.kind])
                families[s.family] = metric_family(name=s.family, description=s.description, kind=kind)
            kwargs = {"buckets": list(s.buckets)} if s.kind == "histogram" else {}
            self._metrics[s] = families[s.family].Metric(labels=labels(model, version, s), **kwargs)
        self._families = families  # the metrics live as long as their families
        self._lock = threading.Lock()
        self._finished: list[dict[str, float]] = []
        self._thread = Periodic(period_s, self.publish_once, "standin-stats")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop, then release the metrics while the stub's shared memory still exists (as
        model_repository/triton/triton_metrics.py TritonMetricsPublisher.stop does, and why)."""
        if self._thread.stop():
            self._metrics.clear()
            self._families.clear()

    def observe_request(self, input_tokens: int, output_tokens: int) -> None:
        """A finished Triton request (row metric.token_len); published by the stats thread."""
        with self._lock:
            self._finished.append({TOTAL_INPUT: input_tokens, TOTAL_OUTPUT: output_tokens})

    def publish_once(self) -> None:
        for s, value in updates(self._series, self._snapshot()):
            if s.kind == "gauge":
                self._metrics[s].set(value)
        with self._lock:
            finished, self._finished = self._finished, []
        for counts in finished:
            for s, value in updates(self._series, counts):
                if s.kind == "histogram":
                    self._metrics[s].observe(value)
