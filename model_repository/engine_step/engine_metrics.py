"""Engine metrics gathered on the step thread without slowing it: observations are buffered
here (a lock and a list append) and published to Prometheus by another thread."""

from __future__ import annotations

import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from contract import metrics
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engine_step.runner import HandleStatus


@dataclass
class MetricsSnapshot:
    observations: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # histogram -> values
    counters: Counter = field(default_factory=Counter)  # (metric name, outcome label or "") -> increment


class MetricsRecorder:
    """A RunnerObserver that buffers what happened since the last `drain()`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot = MetricsSnapshot()

    def on_scheduled(self, queue_s: float) -> None:
        with self._lock:
            self._snapshot.observations[metrics.QUEUE_TIME.name].append(queue_s)

    def on_tokens(self, first: bool, latency_s: float, count: int) -> None:
        spec = metrics.TIME_TO_FIRST_TOKEN if first else metrics.INTER_TOKEN_LATENCY
        with self._lock:
            self._snapshot.observations[spec.name].append(latency_s)
            self._snapshot.counters[(metrics.GENERATED_TOKENS.name, "")] += count

    def on_prefix_lookup(self, queried: int, hits: int) -> None:
        with self._lock:
            self._snapshot.counters[(metrics.PREFIX_CACHE_QUERIES.name, "")] += queried
            self._snapshot.counters[(metrics.PREFIX_CACHE_HITS.name, "")] += hits

    def on_finished(self, request: EngineInputs | None, generated: int, reason: HandleStatus | str) -> None:
        """`reason`: how the request ended (a HandleStatus of the CPU engine, or a relay's outcome)."""
        with self._lock:
            self._snapshot.counters[(metrics.REQUESTS_FINISHED.name, getattr(reason, "value", reason))] += 1

    def drain(self) -> MetricsSnapshot:
        with self._lock:
            snapshot, self._snapshot = self._snapshot, MetricsSnapshot()
        return snapshot
