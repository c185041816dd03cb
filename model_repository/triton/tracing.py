"""Our Python models' spans (docs/tracing.md), children of Triton's span for the request when
Triton traces it, else of the client's span.  Imported only inside the Python-backend stub.

Where a model finds its parent, in order:

1. Triton's own span for this request.  python_backend hands a model the request's trace as
   `request.trace()`, an `InferenceTrace` whose `get_context()` returns Triton's trace context
   (a JSON object of W3C headers, opentelemetry mode) or None (tracing off, or not sampled):
   triton-inference-server/python_backend r24.10 (Triton 2.51, this machine) src/pb_stub.cc
   `py::class_<InferenceTrace>` .def("get_context") and `InferRequest` .def("trace"), filled in
   src/python_be.cc from TRITONBACKEND_RequestTrace + TRITONSERVER_InferenceTraceContext; the
   same at r25.12 (src/pb_stub.cc, the GPU image).  A BLS call carries it on with
   `pb_utils.InferenceRequest(..., trace=request.trace())` (r24.10 and r25.12 src/pb_stub.cc
   py::arg("trace"); src/request_executor.cc spawns a child trace with
   TRITONSERVER_InferenceTraceSpawnChildTrace), so Triton's spans of preprocessing and
   postprocessing hang under tensorrt_llm_bls's.
2. The request's `traceparent` parameter (client/tracing.py sends it; Triton hands an
   ensemble's parameters to its steps, and our relays forward it to the engine).

When both are there but are different traces, the parameter wins and the span links to Triton's
(and names its trace in `triton.trace_id`): Triton 2.51 now and then starts a trace of its own for
a request whose gRPC metadata carried a `traceparent` (seen in about half the runs of
tests/integration/test_tracing.py, which traces six requests: every Triton span of the request
under another trace id), and our spans then stay in the client's tree (docs/tracing.md, Limits).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from contract import request_ids, telemetry
from contract.telemetry import INVALID_SPAN, Span, SpanKind

SERVICE = "triton-models"  # OTEL_SERVICE_NAME overrides it
TRITON_TRACE_ID = "triton.trace_id"  # Triton's own trace for the request, where it is not the client's
_tracer = None
_lock = threading.Lock()


_enabled: bool | None = None


def tracer():
    global _tracer, _enabled
    with _lock:
        if _tracer is None:
            _enabled = telemetry.setup(SERVICE)
            _tracer = telemetry.tracer("llama_triton.models")
        return _tracer


def enabled() -> bool:
    """Whether this stub exports spans (OTEL_EXPORTER_OTLP_* set and the SDK present)."""
    if _enabled is None:
        tracer()
    return bool(_enabled)


def parameters(request) -> dict:
    try:
        value = json.loads(request.parameters() or "{}")
    except (ValueError, AttributeError):
        return {}
    return value if isinstance(value, dict) else {}


def _contexts(request):
    """(Triton's context for this request, the client's from the `traceparent` parameter); each or None."""
    try:
        trace = request.trace()
        triton = telemetry.context_from_json(trace.get_context() if trace is not None else None)
    except Exception:  # an older stub without request.trace()
        triton = None
    return triton, telemetry.context_from(parameters(request))


def _parent_and_orphan(request):
    """The context this request's spans belong under (or None), and Triton's when it is another trace."""
    triton, client = _contexts(request)
    if triton is not None and client is not None and telemetry.trace_id_of(triton) != telemetry.trace_id_of(client):
        return client, triton
    return triton or client, None


def parent_of(request):
    """The OpenTelemetry context this request's spans belong under, or None."""
    return _parent_and_orphan(request)[0]


def carrier_of(request, span: Span | None = None) -> dict[str, str]:
    """What to send on to the next hop (gRPC metadata and parameters): `span`'s context, else
    the request's own traceparent parameter."""
    if span is not None and span.get_span_context().is_valid:
        return telemetry.carrier(span)
    return {k: v for k, v in parameters(request).items() if k in (telemetry.TRACEPARENT, telemetry.TRACESTATE)}


def start(request, name: str, model: str, kind: SpanKind = SpanKind.INTERNAL, **attributes) -> Span:
    """A span of this request (ended by the caller); a no-op span when nobody traces it."""
    if not enabled():  # nothing exported from this process: skip reading the request's context
        return INVALID_SPAN
    parent, orphan = _parent_and_orphan(request)
    attrs = {telemetry.MODEL: model, telemetry.REQUEST_ID: request.request_id(), **attributes}
    if parent is None:  # not traced: keep untraced requests free (no root spans from the models)
        return INVALID_SPAN
    if orphan is not None:
        attrs[TRITON_TRACE_ID] = telemetry.trace_id_of(orphan)
    return tracer().start_span(name, context=parent, kind=kind, attributes=attrs, links=telemetry.links_to(orphan))


def log_line(request, message: str) -> str:
    """A model log line carrying the request's id (pb_utils.Logger writes plain text)."""
    return request_ids.tagged(message, request.request_id() if request is not None else None)


class TracedSink:
    """An engine's ResponseSink (engine_step/runner.py) that ends the engine's span of one
    request: queue time, time to first token, output tokens, error code."""

    def __init__(self, sink, span: Span, sequences: int = 1) -> None:
        self._sink, self._span = sink, span
        self._started = time.monotonic()
        self._first = True
        self._tokens = 0
        self._open = sequences
        self._ended = False

    def is_cancelled(self):
        return self._sink.is_cancelled()

    def on_scheduled(self, queue_s: float) -> None:  # runner._admit: the engine took it
        if self._span.is_recording():
            self._span.set_attribute(telemetry.QUEUE_TIME, round(queue_s * 1000, 3))

    def on_stopped(self) -> None:  # runner: stopped by TensorRT-LLM's `stop` (the client cancelled)
        if self._span.is_recording():
            self._span.set_attribute("llm.cancelled", True)
            self._span.set_attribute(telemetry.FINISH_REASON, "cancelled")

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None):
        self._sink.send(ids, log_probs, cum_log_prob, final, sequence, top)
        self._tokens += len(ids)
        if self._first and len(ids) and self._span.is_recording():
            self._first = False
            self._span.set_attribute(telemetry.TTFT, round((time.monotonic() - self._started) * 1000, 3))
        if final:
            self._open -= 1
            if self._open <= 0:
                self._end()

    def fail(self, message, code=None):
        if code is None:
            self._sink.fail(message)
        else:
            self._sink.fail(message, code)
        telemetry.set_error(self._span, getattr(code, "value", "INTERNAL"), message)
        self._end()

    def _end(self) -> None:
        if self._ended:
            return
        self._ended = True
        self._span.set_attribute(telemetry.OUTPUT_TOKENS, self._tokens)
        self._span.end()


def error_code(message: str) -> str:
    """triton_io.error() leads every message with its code: "[INVALID_ARG] ..."."""
    return message[1 : message.index("]")] if message.startswith("[") and "]" in message else "INTERNAL"


def _response_attributes(response) -> dict:
    """Token counts and finish reason a unary response of ours carries (preprocessing, postprocessing)."""
    out: dict[str, Any] = {}
    for tensor in response.output_tensors():
        name = tensor.name()
        if name in ("input_lengths", "num_input_tokens"):
            out[telemetry.PROMPT_TOKENS] = int(tensor.as_numpy().sum())
        elif name == "num_output_tokens":
            out[telemetry.OUTPUT_TOKENS] = int(tensor.as_numpy().sum())
        elif name == "finish_reason":
            value = tensor.as_numpy().reshape(-1)
            reason = value[0].decode() if value.size and isinstance(value[0], bytes) else ""
            if reason:
                out[telemetry.FINISH_REASON] = reason
    return out


def traced(request, name: str, model: str, handle):
    """handle(request) -> its InferenceResponse, inside a span of the request (unary models)."""
    span = start(request, name, model)
    if not span.is_recording():
        return handle(request)
    try:
        response = handle(request)
    except BaseException as e:
        telemetry.set_error(span, "INTERNAL", repr(e))
        span.end()
        raise
    if response.has_error():
        message = response.error().message()
        telemetry.set_error(span, error_code(message), message)
    else:
        span.set_attributes(_response_attributes(response))
    span.end()
    return response


class RelaySpanSink:
    """A relay's sink (bls_calls.SenderSink's interface) that ends the relay's span when the
    request ends: time to first token, output tokens, error code."""

    def __init__(self, sink, span: Span) -> None:
        self._sink, self._span = sink, span
        self._started = time.monotonic()
        self._first = True
        self._tokens = 0
        self._ended = False

    def forward(self, response, final=False):
        if self._span.is_recording():
            for tensor in response.output_tensors():
                if tensor.name() == "sequence_length":
                    count = int(tensor.as_numpy().sum())
                    self._tokens += count
                    if count and self._first:
                        self._first = False
                        self._span.set_attribute(telemetry.TTFT, round((time.monotonic() - self._started) * 1000, 3))
        self._sink.forward(response, final)
        if final:
            self._end()

    def forward_error(self, response):
        self._sink.forward_error(response)
        message = response.error().message()
        self._end(error_code(message), message)

    def fail(self, message, code):
        self._sink.fail(message, code)
        self._end(str(getattr(code, "value", code)), message)

    def finish(self):
        self._sink.finish()
        self._end()

    def __getattr__(self, name):  # is_cancelled, streaming, sequences, ...
        return getattr(self._sink, name)

    def _end(self, code: str | None = None, message: str = "") -> None:
        if self._ended:
            return
        self._ended = True
        if code:
            telemetry.set_error(self._span, code, message)
        self._span.set_attribute(telemetry.OUTPUT_TOKENS, self._tokens)
        self._span.end()


def end_with_error(span: Span, code: str, message: str) -> None:
    telemetry.set_error(span, code, message)
    span.end()
