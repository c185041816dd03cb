"""OpenAI-style error bodies: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

import re


class ApiError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None,
                 type_: str = "invalid_request_error", code: str | None = None) -> None:
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
    return ApiError(400, f"'{param}' is not supported by this server{': ' + detail if detail else ''}",
                    param=param, code="unsupported_parameter")


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
