"""What contract/telemetry.py uses of opentelemetry-api, as no-ops, for an environment without it
(a Python without the kit's requirements, e.g. a custom image: docs/tracing.md).  Nothing is
ever recorded or propagated through these."""

from __future__ import annotations

import enum
from contextlib import contextmanager


class SpanKind(enum.Enum):
    INTERNAL = 0
    SERVER = 1
    CLIENT = 2


class StatusCode(enum.Enum):
    UNSET = 0
    OK = 1
    ERROR = 2


class Status:
    def __init__(self, status_code=StatusCode.UNSET, description=None) -> None:
        self.status_code, self.description = status_code, description


class _SpanContext:
    is_valid = False
    trace_id = span_id = trace_flags = 0


class Span:
    def is_recording(self) -> bool:
        return False

    def get_span_context(self) -> _SpanContext:
        return _SpanContext()

    def set_attribute(self, *args) -> None: ...

    def set_attributes(self, *args) -> None: ...

    def add_event(self, *args, **kwargs) -> None: ...

    def set_status(self, *args, **kwargs) -> None: ...

    def end(self, *args) -> None: ...


INVALID_SPAN = Span()


class _Tracer:
    def start_span(self, *args, **kwargs) -> Span:
        return INVALID_SPAN

    @contextmanager
    def start_as_current_span(self, *args, **kwargs):
        yield INVALID_SPAN


class _Trace:
    Tracer = _Tracer

    @staticmethod
    def get_tracer(*args, **kwargs) -> _Tracer:
        return _Tracer()

    @staticmethod
    def get_current_span(context=None) -> Span:
        return INVALID_SPAN

    @staticmethod
    def set_span_in_context(span, context=None):
        return None

    @staticmethod
    def set_tracer_provider(provider) -> None: ...


class _Context:
    Context = object

    @staticmethod
    def attach(context):
        return None

    @staticmethod
    def detach(token) -> None: ...


class TraceContextTextMapPropagator:
    def extract(self, carrier, context=None):
        return None

    def inject(self, carrier, context=None) -> None: ...


trace = _Trace()
otel_context = _Context()
