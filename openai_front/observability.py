"""The front's request context (docs/tracing.md): one request id and one SERVER span per HTTP
request, and an access log line that carries both.

- The request id is the client's `x-request-id` when it is usable (contract/request_ids.py), else
  a new one; it is bound for the request's task, so the client (client/aio_client.py) sends it to
  Triton as the request id, and every log line of the request carries it.  The response returns
  it in `x-request-id`.
- The span is the HTTP server span FastAPI (>= 0.16x, `fastapi.telemetry`) makes itself when
  there is one, else ours; either continues an incoming W3C `traceparent` (else starts a trace,
  sampled by OTEL_TRACES_SAMPLER_ARG) and lasts until the last byte of the body, so a streamed
  answer's span covers the stream.  The response returns the trace in `x-trace-id` and `traceresponse`
  (W3C Trace Context Level 2).  A status >= 400 marks the span as failed with the status as
  `error.type`; a client that goes away mid-stream leaves a span with error.type CANCELLED.
"""

from __future__ import annotations

import logging
import time

from contract import request_ids, telemetry
from contract.telemetry import SpanKind, otel_context, trace

_TRACER = telemetry.tracer("llama_triton.openai_front")
access_log = logging.getLogger("openai_front.access")
UNTRACED_PATHS = frozenset({"/live", "/health", "/metrics"})  # probes: no span, no access line


class RequestContext:
    """Pure ASGI middleware (outermost): nothing of the body is buffered."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") in UNTRACED_PATHS:
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        request_id = request_ids.accepted(headers.get(request_ids.HEADER)) or request_ids.new_request_id()
        method, path = scope.get("method", ""), scope.get("path", "")
        span = trace.get_current_span()
        own = not span.is_recording()  # FastAPI >= 0.16x makes the HTTP server span itself: use it
        if own:
            span = _TRACER.start_span(
                f"{method} {path}",
                context=telemetry.context_from(headers),
                kind=SpanKind.SERVER,
                attributes={"http.request.method": method, "url.path": path},
            )
        span.set_attribute(telemetry.REQUEST_ID, request_id)
        context = span.get_span_context()
        extra = [(b"x-request-id", request_id.encode())]
        if context.is_valid:
            trace_id = format(context.trace_id, "032x")
            extra += [
                (b"x-trace-id", trace_id.encode()),
                (b"traceresponse", f"00-{trace_id}-{context.span_id:016x}-{context.trace_flags:02x}".encode()),
            ]
        state = {"status": 0, "done": False}
        started = time.monotonic()

        async def send_with_context(message):
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
                if message["status"] >= 400:  # now: FastAPI's span ends inside the last send
                    telemetry.set_error(span, str(message["status"]), f"HTTP {message['status']}")
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["done"] = True
            await send(message)

        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            with request_ids.bind(request_id):
                try:
                    await self.app(scope, receive, send_with_context)
                finally:
                    _finish(span, own, state, method, path, time.monotonic() - started)
        finally:
            otel_context.detach(token)


def _finish(span, own: bool, state: dict, method: str, path: str, seconds: float) -> None:
    status = state["status"]
    span.set_attribute("http.response.status_code", status)
    if not state["done"]:
        telemetry.set_error(span, "CANCELLED", "the client went away before the response ended")
    if own:
        span.end()
    access_log.info(
        "%s %s %s %.3fs%s",
        method,
        path,
        status,
        seconds,
        "" if state["done"] else " (client gone)",
        extra={"http_status": status, "duration_s": round(seconds, 4), "path": path},
    )
