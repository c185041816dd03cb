"""Triton's own OpenTelemetry tracing, from the kit's trace settings (contract/telemetry.py,
docs/tracing.md).

Checked on this machine (nvidia-pytriton 0.7.0's tritonserver, Triton 2.51): the build has
OpenTelemetry compiled in (opentelemetry-cpp 1.13.0); `--trace-config mode=opentelemetry` exports
OTLP/HTTP with a JSON body (content-type application/json) to `opentelemetry,url`, continues a
W3C `traceparent` sent as gRPC metadata (or an HTTP header), and makes one span per request
(InferRequest), per model (ensemble, each step, each BLS callee that got the caller's trace) and
per execution (compute), with the Triton request id as `triton.request_id`.

Triton samples by count (`rate`: one request in N), not by the client's sampled flag, so a
ratio r becomes rate round(1/r); our own spans follow the client's flag (parent-based).
"""

from __future__ import annotations

import os

from contract.telemetry import TraceSettings

DEFAULT_SERVICE = "triton-server"
SERVICE_ENV = "KIT_TRACE_SERVICE"  # Triton's service.name where OTEL_SERVICE_NAME is not set (the chart sets it)
LEVEL = "TIMESTAMPS"  # never TENSORS: it would export every input, prompts included


def triton_rate(ratio: float) -> int:
    return 0 if ratio <= 0 else max(1, round(1 / ratio))


def trace_args(settings: TraceSettings | None) -> list[str]:
    """tritonserver flags for `settings`; [] when tracing is off."""
    if settings is None or not settings.enabled or settings.sample_ratio <= 0:
        return []
    service = settings.service_name or os.environ.get(SERVICE_ENV) or DEFAULT_SERVICE
    return [
        "--trace-config=mode=opentelemetry",
        f"--trace-config=rate={triton_rate(settings.sample_ratio)}",
        f"--trace-config=level={LEVEL}",
        "--trace-config=count=-1",
        f"--trace-config=opentelemetry,url={settings.endpoint}",
        f"--trace-config=opentelemetry,resource=service.name={service}",
        "--trace-config=opentelemetry,bsp_schedule_delay=500",
    ]
