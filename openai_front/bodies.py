"""Request bodies the front refuses before any route reads them, each with a 4xx in the OpenAI
error shape (docs/openai-api.md#bad-requests):

- a body over the limit (`--max-body-bytes`, DEFAULT_MAX_BODY_BYTES): 413 naming the limit,
  decided from Content-Length before a byte is read, and for a chunked body (no Content-Length)
  as soon as the bytes received pass the limit, so no more than the limit is ever held.  Once
  the 413 is sent, uvicorn discards the rest of the body as it arrives and keeps the connection
  (uvicorn 0.54.0 h11_impl.py: `Data` events are skipped once `our_state is h11.DONE`;
  httptools_impl.py `on_body` returns once `response_complete`), so the client reads the 413
  rather than a reset;
- a body that is not UTF-8 or not JSON, or JSON nested deeper than MAX_JSON_DEPTH: 400;
- a string (a value or a key) that holds a lone UTF-16 surrogate (`"\\ud800"` is valid JSON but
  not Unicode text; it cannot be encoded to UTF-8 for the engine): 400 naming the field as the
  schema errors do (`messages[0].content`).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from fastapi import Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from openai_front.errors import ApiError, shaped

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB: a 128k-token prompt is ~0.5 MB of text
MAX_JSON_DEPTH = 64  # arrays and objects within each other; a tool's JSON schema rarely nests past 20


class BodyTooLarge(Exception):
    pass


def too_large(limit: int) -> ApiError:
    return ApiError(
        413,
        f"request body over the limit of {limit} bytes (the front's --max-body-bytes)",
        code="request_too_large",
    )


class BodyLimit:
    """ASGI middleware: 413 for a body over the limit, before it is read whole."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def refuse(self, scope, receive, send) -> None:
        body, status = shaped(too_large(self.limit), scope.get("path", ""))
        response = JSONResponse(body, status_code=status)
        await response(scope, receive, send)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            return await self.refuse(scope, receive, send)
        state = {"received": 0, "over": False, "started": False}

        async def counted_receive():
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.limit:  # a chunked body (no Content-Length)
                    state["over"] = True
                    raise BodyTooLarge
            return message

        async def guarded_send(message):
            if state["over"]:
                return  # whatever the app makes of a body it could not read: the answer is the 413
            state["started"] = state["started"] or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except BodyTooLarge:
            pass
        if state["over"] and not state["started"]:
            await self.refuse(scope, receive, send)


def _walk_problem(data: Any) -> ApiError | None:
    """The first string holding a lone surrogate, or nesting past MAX_JSON_DEPTH, in parsed JSON."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            if not value.isascii():
                problem = _surrogate(value, path)
                if problem:
                    return problem
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth >= MAX_JSON_DEPTH:
            return ApiError(400, f"the request body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                if not key.isascii() and _surrogate(key, path):
                    return _surrogate(key, path or "body", what="a key of")
                stack.append((item, f"{path}.{key}" if path else key, depth + 1))
        else:
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
    return None


def _surrogate(text: str, path: str, what: str = "") -> ApiError | None:
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError as e:
        code = ord(text[e.start])
        param = path or None
        where = f"{what} '{path}'" if what else f"'{path}'" if path else "the request body"
        return ApiError(
            400,
            f"Invalid {where}: a lone UTF-16 surrogate (\\u{code:04x} at character {e.start}) "
            "is not valid Unicode text",
            param=param,
        )


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return True  # FastAPI parses a body without a content type as JSON (unless strict)
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def body_problem(body: bytes, content_type: str | None) -> ApiError | None:
    """Why a JSON request body cannot be served (None: let the route's schema judge it)."""
    if not body or not _is_json(content_type):
        return None
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        return ApiError(400, f"the request body is not valid UTF-8 ({e.reason} at byte {e.start})")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return ApiError(400, f"the request body is not valid JSON: {e.msg} (at character {e.pos})")
    except RecursionError:
        return ApiError(400, f"the request body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels")
    return _walk_problem(data)


class CheckedBodyRoute(APIRoute):
    """A route whose JSON body is checked (body_problem) before FastAPI parses it; FastAPI would
    answer a RecursionError with a bare `{"detail": "There was an error parsing the body"}` and
    let a lone surrogate through to fail as a 500 when the prompt is encoded."""

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def checked(request: Request):
            if request.method in ("POST", "PUT", "PATCH"):
                problem = body_problem(await request.body(), request.headers.get("content-type"))
                if problem is not None:
                    body, status = shaped(problem, request.url.path)  # Anthropic's shape on /v1/messages
                    return JSONResponse(body, status_code=status)
            return await handler(request)

        return checked
