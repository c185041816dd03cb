"""The client's exceptions; each carries the server's own message."""

from __future__ import annotations

import re


class ClientError(Exception):
    """Any failure of a request."""


class InvalidRequestError(ClientError):
    """The server rejected the request (INVALID_ARG): a parameter is out of range."""


class ServerUnavailable(ClientError):
    """The server cannot be reached or is not ready."""


class RequestTimeout(ClientError):
    """The request took longer than its timeout; it was cancelled on the server."""


class RequestCancelled(ClientError):
    """The request was cancelled."""


_CODE_IN_MESSAGE = re.compile(r"\[(INVALID_ARG|INTERNAL|CANCELLED|UNAVAILABLE|NOT_FOUND|UNSUPPORTED)\]")


def from_triton(exc: Exception) -> ClientError:
    """Map a tritonclient InferenceServerException to our exception types.  Errors that
    arrive on a gRPC stream have no status; our models put the code in the message."""
    status = str(getattr(exc, "status", lambda: "")() or "")
    message = getattr(exc, "message", lambda: str(exc))() or str(exc)
    if not status:
        found = _CODE_IN_MESSAGE.search(message)
        status = found.group(1) if found else ""
    if "INVALID_ARGUMENT" in status or "INVALID_ARG" in status:
        return InvalidRequestError(message)
    if "UNAVAILABLE" in status:
        return ServerUnavailable(message)
    if "CANCELLED" in status:
        return RequestCancelled(message)
    if "DEADLINE_EXCEEDED" in status:
        return RequestTimeout(message)
    return ClientError(f"{status}: {message}" if status else message)
