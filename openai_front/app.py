"""The ASGI app: OpenAI routes over one gRPC client to the ensemble."""

from __future__ import annotations

import dataclasses
import hmac
import json
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse

from client import AsyncLlmClient
from client.errors import ClientError, InvalidRequestError, RequestTimeout, ServerUnavailable
from contract import names
from openai_front.errors import ApiError, param_of
from openai_front.metrics import FrontMetrics, MetricsMiddleware
from openai_front.schemas import ChatCompletionRequest, CompletionRequest
from openai_front.translate import ResponseShaper, chat_input, completion_input, new_id


@dataclass(frozen=True)
class FrontSettings:
    grpc_url: str = names.DEFAULT_GRPC_URL
    model_name: str = "default"  # the id /v1/models lists and responses carry
    api_key: str | None = None  # require "Authorization: Bearer <key>" when set
    max_body_bytes: int = 1 << 20
    request_timeout_s: float | None = 600.0


class BodyLimit:
    """ASGI middleware: 413 for bodies over the limit, before anything parses them."""

    def __init__(self, app, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and int(length) > self.limit:
            response = JSONResponse(ApiError(413, f"request body over {self.limit} bytes").body(), status_code=413)
            return await response(scope, receive, send)
        return await self.app(scope, receive, send)


DISCONNECT_CHECK_S = 0.2


class ClosingStreamingResponse(StreamingResponse):
    """Closes its generator however the response ends.  When the client goes away,
    Starlette stops iterating but leaves the generator to the garbage collector, so the
    request would go on generating on the server; closing it cancels the request."""

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()


def _sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


def _client_error(e: ClientError, chat: bool) -> ApiError:
    if isinstance(e, InvalidRequestError):
        return ApiError(400, str(e), param=param_of(str(e), chat))
    if isinstance(e, ServerUnavailable):
        return ApiError(503, f"the model server is unavailable: {e}", type_="server_error")
    if isinstance(e, RequestTimeout):
        return ApiError(504, str(e), type_="server_error")
    return ApiError(500, str(e), type_="server_error")


def create_app(settings: FrontSettings) -> FastAPI:
    state: dict[str, AsyncLlmClient] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state["client"] = AsyncLlmClient(settings.grpc_url)
        yield
        await state["client"].close()

    app = FastAPI(title="Llama on Triton - OpenAI-compatible API", lifespan=lifespan)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=FrontMetrics())  # outermost: counts 413s too

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError):
        return JSONResponse(e.body(), status_code=e.status)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, e: RequestValidationError):
        first = e.errors()[0]
        loc = [str(x) for x in first.get("loc", ()) if x != "body"]
        message = f"{'.'.join(loc) or 'body'}: {first.get('msg')}"
        if first.get("type") == "extra_forbidden":
            message = f"unrecognized request argument supplied: {'.'.join(loc)}"
        return JSONResponse(ApiError(400, message, param=".".join(loc) or None).body(), status_code=400)

    async def authorized(request: Request) -> None:
        if settings.api_key is None:
            return
        header = request.headers.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else ""
        if not hmac.compare_digest(token.encode(), settings.api_key.encode()):
            raise ApiError(401, "invalid or missing API key", type_="invalid_request_error", code="invalid_api_key")

    def check_model(model: str) -> None:
        if model not in (settings.model_name, names.ENSEMBLE):
            raise ApiError(404, f"model {model!r} does not exist; this server serves {settings.model_name!r}",
                           param="model", code="model_not_found")

    @app.get("/live")
    async def live():  # the process answers: the liveness probe (readiness is /health, Triton's too)
        return {"status": "ok"}

    @app.get("/health")
    async def health():
        ready = await state["client"].is_ready()
        return JSONResponse({"status": "ok" if ready else "unavailable"}, status_code=200 if ready else 503)

    @app.get("/v1/models", dependencies=[Depends(authorized)])
    async def models():
        return {"object": "list", "data": [{"id": settings.model_name, "object": "model", "created": 0,
                                            "owned_by": "llama-triton-kit"}]}

    async def respond(request: Request, prompt, sampling, stream: bool, include_usage: bool, chat: bool):
        client = state["client"]
        shaper = ResponseShaper(settings.model_name, chat)
        if not stream:
            try:
                result = await client.generate(prompt, sampling, timeout_s=settings.request_timeout_s)
            except ClientError as e:
                raise _client_error(e, chat) from None
            return shaper.whole(result)
        chunks = client.stream(prompt, sampling, timeout_s=settings.request_timeout_s, request_id=new_id("req"))
        try:
            first = await chunks.__anext__()  # errors before the first byte become HTTP errors
        except StopAsyncIteration:
            first = None
        except ClientError as e:
            raise _client_error(e, chat) from None
        events = _events(request, shaper, first, chunks, include_usage, chat)
        return ClosingStreamingResponse(events, media_type="text/event-stream")

    async def _events(request: Request, shaper: ResponseShaper, first, chunks: AsyncIterator, include_usage: bool,
                      chat: bool):
        opening = shaper.first_chunk()
        if opening:
            yield _sse(opening)
        finish, last = None, None
        next_check = time.monotonic() + DISCONNECT_CHECK_S
        try:
            pending = [first] if first is not None else []
            while True:
                chunk = pending.pop() if pending else await chunks.__anext__()
                last = chunk
                if time.monotonic() >= next_check:
                    # uvicorn drops writes to a closed connection silently: ask.
                    if await request.is_disconnected():
                        return
                    next_check = time.monotonic() + DISCONNECT_CHECK_S
                if finish is None:
                    finish = chunk.finish_reason or None
                    if chunk.text or finish:
                        yield _sse(shaper.chunk(chunk, finish))
        except StopAsyncIteration:
            pass
        except ClientError as e:
            yield _sse(_client_error(e, chat).body())
        finally:
            await chunks.aclose()  # on a client disconnect this cancels the request on the server
        if finish is None and last is not None:
            yield _sse(shaper.chunk(dataclasses.replace(last, text=""), "stop"))
        if include_usage and last is not None:
            yield _sse(shaper.usage_chunk(last.num_input_tokens, last.num_output_tokens))
        yield _sse("[DONE]")

    @app.post("/v1/completions", dependencies=[Depends(authorized)])
    async def completions(req: CompletionRequest, request: Request):
        check_model(req.model)
        prompt, sampling = completion_input(req)
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        return await respond(request, prompt, sampling, req.stream, include_usage, chat=False)

    @app.post("/v1/chat/completions", dependencies=[Depends(authorized)])
    async def chat_completions(req: ChatCompletionRequest, request: Request):
        check_model(req.model)
        messages, sampling = chat_input(req)
        include_usage = bool(req.stream_options and req.stream_options.include_usage)
        return await respond(request, messages, sampling, req.stream, include_usage, chat=True)

    return app
