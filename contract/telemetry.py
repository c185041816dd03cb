"""OpenTelemetry tracing for every process of the kit: the OpenAI front, the Python client, the
launcher and the Triton Python models (docs/tracing.md).

Settings are OpenTelemetry's standard environment variables, so one set configures Triton's own
exporter (`serving` translates them to --trace-config), our processes and any collector:

- OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (a full .../v1/traces URL) or OTEL_EXPORTER_OTLP_ENDPOINT
  (a base URL, /v1/traces appended): OTLP/HTTP.  Unset: tracing is off and every span is
  OpenTelemetry's no-op span (opentelemetry-api only; nothing is exported).
- OTEL_TRACES_SAMPLER_ARG: the ratio of new traces sampled (default DEFAULT_SAMPLE_RATIO); a
  request that arrives with a sampled W3C traceparent is always traced (parent-based sampling).
- OTEL_SERVICE_NAME: the service name (default: the process's own, e.g. "openai-front").
- KIT_TRACE_PROMPTS=1: put the prompt text on spans (never by default).

The exporter is opentelemetry-sdk's BatchSpanProcessor + OTLPSpanExporter (protobuf over HTTP);
both are in requirements/lock.txt.  A process without the SDK traces nothing and says so once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

try:
    from opentelemetry import context as otel_context  # noqa: F401  (re-exported)
    from opentelemetry import trace
    from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode  # noqa: F401  (INVALID_SPAN: re-exported)
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    HAVE_API = True
except ImportError:  # no opentelemetry-api (an image without the kit's requirements): spans are no-ops
    from contract.otel_fallback import (  # type: ignore[assignment,no-redef]  # the same names, no-ops
        INVALID_SPAN,  # noqa: F401  (re-exported)
        Span,
        SpanKind,
        Status,
        StatusCode,
        TraceContextTextMapPropagator,
        otel_context,  # noqa: F401  (re-exported)
        trace,
    )

    HAVE_API = False

DEFAULT_SAMPLE_RATIO = 1.0
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
PROMPTS_ENV = "KIT_TRACE_PROMPTS"

_PROPAGATOR = TraceContextTextMapPropagator()
_lock = threading.Lock()
_provider: Any = None  # the SDK's TracerProvider; False: tracing off in this process
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TraceSettings:
    endpoint: str | None = None  # the OTLP/HTTP traces URL (.../v1/traces); None: off
    sample_ratio: float = DEFAULT_SAMPLE_RATIO
    service_name: str | None = None
    record_prompts: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.endpoint)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "TraceSettings":
        env = os.environ if env is None else env
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None
        if not endpoint and env.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
            endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"
        ratio = float(env.get("OTEL_TRACES_SAMPLER_ARG", DEFAULT_SAMPLE_RATIO))
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"OTEL_TRACES_SAMPLER_ARG={ratio}: a ratio in [0, 1]")
        return cls(
            endpoint=endpoint,
            sample_ratio=ratio,
            service_name=env.get("OTEL_SERVICE_NAME") or None,
            record_prompts=env.get(PROMPTS_ENV, "") in ("1", "true", "yes"),
        )

    def environment(self) -> dict[str, str]:
        """The variables that give another process these settings (not the service name: each
        process keeps its own, e.g. triton-models, openai-front)."""
        out = {"OTEL_TRACES_SAMPLER_ARG": str(self.sample_ratio)}
        if self.endpoint:
            out["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = self.endpoint
        if self.record_prompts:
            out[PROMPTS_ENV] = "1"
        return out


def settings() -> TraceSettings:
    return TraceSettings.from_env()


def setup(default_service: str, trace_settings: TraceSettings | None = None) -> bool:
    """Install this process's tracer provider once (later calls do nothing); True when spans
    are exported."""
    global _provider
    chosen = trace_settings or settings()
    with _lock:
        if _provider is not None:
            return _provider is not False
        if not chosen.enabled or not HAVE_API:
            _provider = False
            return False
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        except ImportError as e:  # the API alone: no-op spans
            log.warning("tracing is configured (%s) but opentelemetry-sdk is missing: %s", chosen.endpoint, e)
            _provider = False
            return False
        resource = Resource.create({"service.name": chosen.service_name or default_service})
        provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(chosen.sample_ratio)))
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=chosen.endpoint), schedule_delay_millis=500)
        )
        trace.set_tracer_provider(provider)
        _provider = provider
        return True


def flush(timeout_ms: int = 5000) -> None:
    if _provider:
        _provider.force_flush(timeout_ms)


def tracer(name: str):
    return trace.get_tracer(name)


# --- W3C trace context ---------------------------------------------------------------------
def context_from(carrier: Mapping[str, str] | None):
    """The remote parent in a carrier holding `traceparent` (+ `tracestate`), or None."""
    if not carrier or not carrier.get(TRACEPARENT):
        return None
    ctx = _PROPAGATOR.extract({k: str(v) for k, v in carrier.items() if k in (TRACEPARENT, TRACESTATE)})
    return ctx if ctx is not None and trace.get_current_span(ctx).get_span_context().is_valid else None


def context_from_json(text: str | None):
    """Triton's trace context (python_backend `request.trace().get_context()`): a JSON object of
    the W3C headers of Triton's span for this request, in opentelemetry mode."""
    if not text:
        return None
    try:
        carrier = json.loads(text)
    except ValueError:
        return None
    return context_from(carrier) if isinstance(carrier, dict) else None


def trace_id_of(ctx) -> str:
    """The trace id (32 hex digits) of a context's span; "" for none."""
    if ctx is None:
        return ""
    span_context = trace.get_current_span(ctx).get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""


def links_to(ctx) -> list:
    """An OpenTelemetry Link to a context's span, for a span started elsewhere; [] without the API."""
    if not HAVE_API or not trace_id_of(ctx):
        return []
    from opentelemetry.trace import Link

    return [Link(trace.get_current_span(ctx).get_span_context())]


def carrier(span: Span | None = None) -> dict[str, str]:
    """`traceparent` (+ `tracestate`) of `span` (default: the current one); {} when it is not valid."""
    out: dict[str, str] = {}
    ctx = trace.set_span_in_context(span) if span is not None else None
    _PROPAGATOR.inject(out, context=ctx)
    return out


def trace_id(span: Span | None = None) -> str:
    span_context = (span or trace.get_current_span()).get_span_context()
    return format(span_context.trace_id, "032x") if span_context.is_valid else ""


@contextmanager
def span(
    tracer_, name: str, parent=None, kind: SpanKind = SpanKind.INTERNAL, attributes: Mapping | None = None
) -> Iterator[Span]:
    """A span that records an escaping exception as its error status."""
    with tracer_.start_as_current_span(
        name,
        context=parent,
        kind=kind,
        attributes=dict(attributes or {}),
        record_exception=True,
        set_status_on_exception=True,
    ) as s:
        yield s


def set_error(s: Span, code: str, message: str) -> None:
    """A failed request: its error code (INVALID_ARG, UNAVAILABLE, CANCELLED, ...) and message."""
    s.set_attribute("error.type", code)
    s.set_status(Status(StatusCode.ERROR, f"[{code}] {message}"[:500]))


# Span attribute names (one table for every hop).
MODEL = "llm.model"
REQUEST_ID = "llm.request_id"
PROMPT_TOKENS = "llm.usage.prompt_tokens"
OUTPUT_TOKENS = "llm.usage.completion_tokens"
QUEUE_TIME = "llm.queue_time_ms"
TTFT = "llm.time_to_first_token_ms"
FINISH_REASON = "llm.finish_reason"
PROMPT = "llm.prompt"
STREAM = "llm.stream"
