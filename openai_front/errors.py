"""OpenAI-style error bodies: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

import re


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type_: str = "invalid_request_error",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.type = type_
        self.code = code

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def invalid(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def unsupported(param: str, detail: str = "") -> ApiError:
    return ApiError(
        400,
        f"'{param}' is not supported by this server{': ' + detail if detail else ''}",
        param=param,
        code="unsupported_parameter",
    )


# Ensemble input names -> the OpenAI parameter a client sent.
_PARAM_NAMES = {"text_input": "prompt", "stop_words": "stop", "bad_words": "stop", "min_tokens": "min_tokens"}
_FIELD = re.compile(r"'([a-z_]+)'")


def param_of(message: str, chat: bool) -> str | None:
    found = _FIELD.search(message)
    if not found:
        return None
    name = found.group(1)
    if name == "text_input" or name == "messages":
        return "messages" if chat else "prompt"
    return _PARAM_NAMES.get(name, name)


# Triton's wrapping of a model's error: "in ensemble 'ensemble', [INVALID_ARG] invalid 'x': ..."
_TRITON_PREFIX = re.compile(
    r"^(?:\s*(?:in ensemble '[^']*',|\[[A-Z_]+\]|\[StatusCode\.[A-Z_]+\]|"
    r"[A-Za-z]*Error:|INVALID_ARG(?:UMENT)?:))+\s*"
)
_INVALID = re.compile(r"invalid '([a-z_]+)': ?(.*)", re.S)


def api_message(message: str, chat: bool) -> tuple[str, str | None]:
    """A server-side refusal in the API's words: Triton's prefixes dropped, ensemble input names
    replaced by the OpenAI parameter the client sent; (message, param)."""
    text = _TRITON_PREFIX.sub("", message.strip())
    found = _INVALID.search(text)
    if found is None:
        return text, param_of(text, chat)
    name, detail = found.groups()
    param = param_of(f"'{name}'", chat)
    public_name = param or name  # a field the API does not name: the engine's own
    for internal, public in (("text_input", public_name), ("'messages'", "'messages'")):
        detail = detail.replace(internal, public)
    return f"Invalid '{public_name}': {detail}", param


def validation_error_body(error: dict) -> ApiError:
    """A body the schema refuses (pydantic's first error) -> 400 naming the parameter as
    OpenAI does (`messages[0].role`); a body that is not JSON names no parameter."""
    loc = [x for x in error.get("loc", ()) if x != "body"]
    kind = error.get("type", "")
    if kind == "json_invalid" or (not loc and kind != "missing"):
        return ApiError(
            400,
            f"the request body is not valid JSON: {error.get('msg')} "
            f"(at character {(error.get('loc') or ('', '?'))[-1]})"
            if kind == "json_invalid"
            else f"invalid request body: {error.get('msg')}",
        )
    param = ""
    for part in loc:
        if isinstance(part, int):
            param += f"[{part}]"
        elif "[" in str(part) or "-" in str(part) or str(part) in ("str", "int", "float", "bool", "dict", "list"):
            continue  # pydantic's union-member and type tags
        else:
            param += f".{part}" if param else str(part)
    if kind == "extra_forbidden":
        return ApiError(
            400, f"Unrecognized request argument supplied: {param}", param=param, code="unrecognized_argument"
        )
    if kind == "missing":
        return ApiError(400, f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")
    return ApiError(400, f"Invalid '{param}': {error.get('msg')}", param=param)


# --- Anthropic's error shape, on /v1/messages (openai_front/messages.py) --------------------------
# https://docs.claude.com/en/api/errors ("HTTP errors", "Error shapes"): {"type": "error", "error":
# {"type", "message"}}; the types are anthropic 2.15.0's anthropic/types/shared/error_type.py.
ANTHROPIC_PATH = "/v1/messages"
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
OVERLOADED = 529  # Anthropic's status for "temporarily overloaded": the model server is unavailable


def anthropic_path(path: str) -> bool:
    return path == ANTHROPIC_PATH or path.startswith(ANTHROPIC_PATH + "/")


def anthropic_status(e: ApiError) -> int:
    return OVERLOADED if e.status == 503 else e.status


def anthropic_body(e: ApiError) -> dict:
    status = anthropic_status(e)
    kind = ANTHROPIC_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": e.message}}


def shaped(e: ApiError, path: str) -> tuple[dict, int]:
    """(body, status) of an error in the shape of the API the path belongs to."""
    if anthropic_path(path):
        return anthropic_body(e), anthropic_status(e)
    return e.body(), e.status
