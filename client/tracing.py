"""The client's span of one Triton request (docs/tracing.md): a CLIENT span under the caller's
current span, whose W3C `traceparent` goes to Triton both as gRPC metadata (Triton's own
OpenTelemetry tracing reads it: its spans become this span's children) and as a request
parameter (our Python models read it when Triton's tracing is off).  With tracing off (no
exporter configured) the span is OpenTelemetry's no-op span and nothing is added to the request."""

from __future__ import annotations

from typing import Sequence

from client.errors import ClientError, InvalidRequestError, RequestCancelled, RequestTimeout, ServerUnavailable
from client.types import StreamChunk
from contract import telemetry
from contract.telemetry import SpanKind

_TRACER = telemetry.tracer("llama_triton.client")
_CODES = (
    (InvalidRequestError, "INVALID_ARG"),
    (ServerUnavailable, "UNAVAILABLE"),
    (RequestTimeout, "DEADLINE_EXCEEDED"),
    (RequestCancelled, "CANCELLED"),
)


def error_code(e: ClientError) -> str:
    return next((code for cls, code in _CODES if isinstance(e, cls)), "INTERNAL")


class RequestSpan:
    def __init__(self, model: str, request_id: str, stream: bool, prompt: str | Sequence = "") -> None:
        self.span = _TRACER.start_span(
            f"triton {model}",
            kind=SpanKind.CLIENT,
            attributes={
                telemetry.MODEL: model,
                telemetry.REQUEST_ID: request_id,
                telemetry.STREAM: stream,
                "rpc.system": "grpc",
                "rpc.service": "inference.GRPCInferenceService",
                "rpc.method": "ModelStreamInfer",
            },
        )
        if self.span.is_recording() and telemetry.settings().record_prompts:
            self.span.set_attribute(telemetry.PROMPT, prompt if isinstance(prompt, str) else str(list(prompt)))
        self.carrier = telemetry.carrier(self.span)  # {} when not sampled / tracing off
        self._first = True
        self._last: dict[int, StreamChunk] = {}
        self._finish = ""

    @property
    def headers(self) -> dict[str, str] | None:
        return dict(self.carrier) or None

    @property
    def parameters(self) -> dict[str, str]:
        return dict(self.carrier)

    def on_chunk(self, chunk: StreamChunk) -> None:
        if not self.span.is_recording():
            return
        if self._first:
            self._first = False
            self.span.add_event("first_response")
            self.span.set_attribute(telemetry.TTFT, round(chunk.arrived_s * 1000, 3))
        self._last[chunk.sequence_index] = chunk
        self._finish = self._finish or chunk.finish_reason

    def end(self, error: BaseException | None, finished: bool) -> None:
        span = self.span
        if span.is_recording():
            if self._last:
                span.set_attribute(telemetry.PROMPT_TOKENS, next(iter(self._last.values())).num_input_tokens)
                span.set_attribute(telemetry.OUTPUT_TOKENS, sum(c.num_output_tokens for c in self._last.values()))
            if self._finish:
                span.set_attribute(telemetry.FINISH_REASON, self._finish)
            if isinstance(error, ClientError):
                telemetry.set_error(span, error_code(error), str(error))
            elif error is not None:  # the caller left (break, task cancelled): the request was cancelled
                telemetry.set_error(span, "CANCELLED", f"abandoned by the caller ({type(error).__name__})")
            elif not finished:
                telemetry.set_error(span, "CANCELLED", "abandoned by the caller before the final response")
        span.end()
