"""One request id per request, in every log line about it (docs/tracing.md).

The id comes from the client (`x-request-id`, or the Triton request id it sends), else it is made
at the edge (the OpenAI front, the Python client).  It travels as the Triton request id (Triton
hands it to every ensemble step and BLS callee; our relays forward it to the engine), so the
front's, the launcher's and the models' lines for one request carry the same id.

`bind(request_id)` sets it for the current task/thread; `RequestIdFilter` puts it (and the
current trace id) on every log record; `configure_logging(json_lines=True)` writes one JSON
object per line.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

HEADER = "x-request-id"
MAX_LENGTH = 128
# Printable and safe in a header, a log line and a Triton request id; anything else is replaced.
_VALID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,%d}$" % MAX_LENGTH)

_current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


def new_request_id(prefix: str = "req") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def accepted(value: str | None) -> str | None:
    """A client's request id if it is usable as is, else None (a new one is made)."""
    return value if value and _VALID.match(value) else None


def current() -> str:
    return _current.get()


@contextmanager
def bind(request_id: str) -> Iterator[str]:
    token = _current.set(request_id)
    try:
        yield request_id
    finally:
        _current.reset(token)


def tagged(message: str, request_id: str | None = None) -> str:
    """A model's log line (pb_utils.Logger takes plain text) with the request id in front."""
    rid = request_id if request_id is not None else current()
    return f"[request_id={rid}] {message}" if rid else message


class RequestIdFilter(logging.Filter):
    """Adds `request_id` and `trace_id` to every record (empty outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = current()
        if not hasattr(record, "trace_id"):
            try:
                from contract.telemetry import trace_id

                record.trace_id = trace_id()
            except Exception:  # logging must never fail
                record.trace_id = ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, trace_id, and any
    `extra=` fields the call passed."""

    _STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


LOG_FORMATS = ("text", "json")  # a process's --log-format: text lines, or one JSON object per line
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [request_id=%(request_id)s trace_id=%(trace_id)s] %(message)s"


def configure_logging(json_lines: bool = False, level: int = logging.INFO, stream=None) -> logging.Handler:
    """The root logger of a process of ours (front, launcher): one handler, request ids on every line."""
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_kit_request_ids", False)]:
        root.removeHandler(old)
    handler._kit_request_ids = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    return handler
