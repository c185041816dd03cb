"""An OTLP/HTTP trace receiver for the tests: POST /v1/traces bodies (protobuf
ExportTraceServiceRequest, what Triton's exporter and opentelemetry-exporter-otlp-proto-http send)
decoded with opentelemetry-proto, nothing of ours in between.  `spans()` returns what arrived;
`tree(trace_id)` prints it as the note's trace tree."""

from __future__ import annotations

import base64
import gzip
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                       ExportTraceServiceResponse)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    start_ns: int
    end_ns: int
    kind: int
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    attributes: dict = field(default_factory=dict)
    events: tuple = ()

    @property
    def duration_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


def _value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _hex_ids_to_base64(node):
    """OTLP/JSON writes trace and span ids as hex (the OTLP spec's exception to protobuf's JSON
    mapping, which would read them as base64)."""
    if isinstance(node, dict):
        return {k: (base64.b64encode(bytes.fromhex(v)).decode() if k in _ID_FIELDS and isinstance(v, str)
                    else _hex_ids_to_base64(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


def decode(body: bytes, content_type: str = "application/x-protobuf") -> list[ReceivedSpan]:
    """Triton 2.51's exporter (opentelemetry-cpp 1.13) posts OTLP/JSON; the Python SDK's posts
    protobuf."""
    request = ExportTraceServiceRequest()
    if "json" in content_type:
        json_format.ParseDict(_hex_ids_to_base64(json.loads(body)), request, ignore_unknown_fields=True)
    else:
        request.ParseFromString(body)
    out = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                out.append(ReceivedSpan(
                    service=str(resource.get("service.name", "")), name=s.name, trace_id=s.trace_id.hex(),
                    span_id=s.span_id.hex(), parent_id=s.parent_span_id.hex(), start_ns=s.start_time_unix_nano,
                    end_ns=s.end_time_unix_nano, kind=s.kind, status_code=s.status.code,
                    status_message=s.status.message, attributes={a.key: _value(a.value) for a in s.attributes},
                    events=tuple(e.name for e in s.events)))
    return out


class OtlpReceiver:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self.requests = 0
        self.errors: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                status = 200
                try:
                    spans = decode(body, self.headers.get('content-type', '')) if self.path.rstrip("/").endswith("/v1/traces") else []
                except Exception as e:  # a body that is not OTLP protobuf
                    spans, status = [], 400
                    receiver.errors.append(f"{self.path} {self.headers.get('content-type')}: {e!r}: {body[:300]!r}")
                with receiver._lock:
                    receiver._spans.extend(spans)
                    receiver.requests += 1
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "OtlpReceiver":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self, trace_id: str | None = None) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self._spans if trace_id is None or s.trace_id == trace_id]

    def wait_for(
        self, trace_id: str, names: set[str], timeout_s: float = 45.0, one_tree: bool = True, stop=None
    ) -> list[ReceivedSpan]:
        """The trace's spans once every name in `names` arrived and (`one_tree`) they form one tree
        (every parent arrived but the root's), or whatever came by the timeout or once `stop()`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (stop and stop()):
            spans = self.spans(trace_id)
            ids = {s.span_id for s in spans}
            if names <= {s.name for s in spans} and (not one_tree or sum(s.parent_id not in ids for s in spans) == 1):
                return spans
            time.sleep(0.2)
        return self.spans(trace_id)


def tree(spans: list[ReceivedSpan]) -> str:
    """One line per span, children indented under their parent, in start order."""
    by_parent: dict[str, list[ReceivedSpan]] = {}
    ids = {s.span_id for s in spans}
    for s in sorted(spans, key=lambda s: s.start_ns):
        by_parent.setdefault(s.parent_id if s.parent_id in ids else "", []).append(s)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for s in by_parent.get(parent, []):
            status = {0: "", 1: " OK", 2: f" ERROR {s.status_message!r}"}.get(s.status_code, "")
            lines.append(f"{'  ' * depth}{s.name} [{s.service}] span={s.span_id[:8]} "
                         f"parent={s.parent_id[:8] or '-'} {s.duration_ms:.1f} ms{status}")
            walk(s.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)
