"""The launcher's supervision counts (contract/supervision.py) on Triton's /metrics: published
once, when the server the supervisor (re)started loads postprocessing, from the record file
named in the server's environment.  A server started without the launcher has none: nothing
is published.  Imported only inside the stub."""

from __future__ import annotations

import os
from pathlib import Path

import triton_python_backend_utils as pb_utils

from contract import metrics
from contract.supervision import SERVER_EXITED, STUB_DIED, SUPERVISION_FILE_ENV, WEDGED, SupervisionRecord


def publish_supervision(instance_name: str) -> list:
    """Counters of restarts (by reason) and wedges (by entry); the caller keeps the returned
    objects alive for as long as they are to be published.  Only the model's first instance
    publishes (the families are the server's, shared by the instances)."""
    path = os.environ.get(SUPERVISION_FILE_ENV)
    if not path or not instance_name.endswith("_0_0"):
        return []
    record = SupervisionRecord.read(Path(path))
    kept: list = []
    for spec, label, counts in (
        (metrics.SERVER_RESTARTS, "reason", {r: 0 for r in (SERVER_EXITED, STUB_DIED, WEDGED)} | record.restarts),
        (metrics.WEDGES, "entry", record.wedges),
    ):
        family = pb_utils.MetricFamily(name=spec.name, description=spec.help, kind=pb_utils.MetricFamily.COUNTER)
        kept.append(family)
        for key, count in counts.items():
            metric = family.Metric(labels={label: key})
            if count:
                metric.increment(count)
            kept.append(metric)
    return kept
