"""Publishes engine metrics through the Python backend's custom-metrics API (they appear on
Triton's /metrics endpoint).  Imported only inside the stub."""

from __future__ import annotations

import threading
from typing import Callable

import triton_python_backend_utils as pb_utils

from contract import metrics
from model_repository.engine_step.engine_metrics import MetricsRecorder


def _kind(kind: metrics.MetricKind):
    # pb_utils.MetricFamily exists only once the stub runs the model, not at import time.
    return getattr(pb_utils.MetricFamily, kind.name)


class TritonMetricsPublisher:
    """Every `interval_s`: publish the recorder's buffered observations and read the gauges."""

    def __init__(
        self,
        model: str,
        specs: tuple[metrics.MetricSpec, ...],
        gauges: Callable[[], dict[str, float]],
        recorder: MetricsRecorder | None = None,
        interval_s: float = 0.25,
        aliases: bool = False,
    ) -> None:
        """aliases: also publish the gauges under their standard names (contract/metrics.py
        GAUGE_ALIASES); only for an engine model, which no C++ TensorRT-LLM backend shares a server with."""
        self._model = model
        self._aliases = metrics.GAUGE_ALIASES if aliases else {}
        specs = tuple(specs) + (metrics.ALIAS_METRICS if aliases else ())
        self._specs = {s.name: s for s in specs}
        self._recorder = recorder
        self._gauges = gauges
        self._interval = interval_s
        self._families = {
            s.name: pb_utils.MetricFamily(name=s.name, description=s.help, kind=_kind(s.kind)) for s in specs
        }
        self._metrics: dict[tuple[str, str], object] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="engine-metrics", daemon=True)

    def _metric(self, name: str, outcome: str = "", extra: tuple[str, str] | None = None):
        key = (name, outcome if extra is None else "=".join(extra))
        if key not in self._metrics:
            spec = self._specs[name]
            labels = (
                {"model": self._model} | ({"outcome": outcome} if outcome else {}) | (dict([extra]) if extra else {})
            )
            kwargs = {"buckets": list(spec.buckets)} if spec.kind == metrics.MetricKind.HISTOGRAM else {}
            self._metrics[key] = self._families[name].Metric(labels=labels, **kwargs)
        return self._metrics[key]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop publishing and release the metrics while the stub's shared memory still exists:
        a MetricFamily destroyed later, during the interpreter's exit, writes to shared memory
        that is gone and the stub segfaults (Metric::Clear -> SaveToSharedMemory in
        Py_FinalizeEx, seen in build/logs/tritonserver.log on every `make stop`)."""
        self._stop.set()
        self._thread.join(2)
        if not self._thread.is_alive():
            self._metrics.clear()
            self._families.clear()

    def publish_once(self) -> None:
        if self._recorder is not None:
            snapshot = self._recorder.drain()
            for name, values in snapshot.observations.items():
                metric = self._metric(name)
                for v in values:
                    metric.observe(v)
            for (name, outcome), increment in snapshot.counters.items():
                self._metric(name, outcome).increment(increment)
        for name, value in self._gauges().items():
            self._metric(name).set(value)
            alias = self._aliases.get(name)
            if alias is not None:
                self._metric(alias.spec.name, extra=(alias.label, alias.value)).set(value)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.publish_once()
            except Exception as e:  # metrics must never take the engine down
                pb_utils.Logger.log_warn(f"metrics publishing failed: {e!r}")
