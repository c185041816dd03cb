"""The ASGI app: OpenAI routes over one gRPC client to the ensemble."""

from __future__ import annotations

import dataclasses
import hmac
import json
import time
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncGenerator, Iterator

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from client import AsyncLlmClient
from client.errors import ClientError, InvalidRequestError, RequestTimeout, ServerUnavailable
from client.types import StreamChunk
from contract import lora, names, request_ids, telemetry, tool_formats
from openai_front import messages, responses
from openai_front.bodies import DEFAULT_MAX_BODY_BYTES, BodyLimit, CheckedBodyRoute
from openai_front.errors import ApiError, api_message, shaped, unsupported, validation_error_body
from openai_front.logprobs import TokenTexts
from openai_front.metrics import FrontMetrics, MetricsMiddleware
from openai_front.observability import RequestContext
from openai_front.prompt_logprobs import as_asked
from openai_front.response_store import StoreSettings
from openai_front.schemas import ChatCompletionRequest, CompletionRequest
from openai_front.streaming import DISCONNECT_CHECK_S, ClosingStreamingResponse, Disconnected, first_of, watched
from openai_front.tool_responses import ToolTurn
from openai_front.translate import (
    PRIORITY_HEADER,
    ResponseShaper,
    chat_prompt_shape,
    chat_turn,
    completion_input,
    completion_prompt_shape,
    prompt_token_ids,
    usage,
    with_priority_header,
)


@dataclass(frozen=True)
class FrontSettings:
    grpc_url: str = names.DEFAULT_GRPC_URL
    model_name: str = "default"  # the id /v1/models lists and responses carry
    api_key: str | None = None  # require "Authorization: Bearer <key>" when set
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # 413 over it (openai_front/bodies.py)
    request_timeout_s: float | None = 600.0
    tokenizer_dir: Path | None = None  # tokenizer.json of the served checkpoint: token texts of logprobs
    # contract/tool_formats.py; None: recorded in or detected from tokenizer_dir, else the json fallback
    tool_call_format: str | None = None

    def resolved_tool_call_format(self) -> str:
        if self.tool_call_format is not None:
            return self.tool_call_format
        return tool_formats.recorded_or_detected(self.tokenizer_dir) if self.tokenizer_dir else tool_formats.JSON

    response_store: StoreSettings = StoreSettings()  # /v1/responses: previous_response_id, GET, DELETE


def _sse(data: dict | str) -> str:
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


@contextmanager
def engine_request_id(request: Request, body_id: str | None) -> Iterator[str | None]:
    """vLLM's `request_id`: unless the client sent an X-Request-Id header (which wins, as in
    vLLM), the body's id is the engine request's id while the route runs (the client reads it
    when it sends: client/aio_client.py) and the response id's suffix; None when not given."""
    if body_id is None:
        yield None
        return
    if request_ids.accepted(body_id) is None:
        raise ApiError(
            400,
            f"'request_id' must be 1-{request_ids.MAX_LENGTH} characters of [A-Za-z0-9._:@/+=-]",
            param="request_id",
        )
    if request.headers.get(request_ids.HEADER):
        yield body_id
        return
    with request_ids.bind(body_id):
        yield body_id


def _client_error(e: ClientError, chat: bool) -> ApiError:
    if isinstance(e, InvalidRequestError):
        message, param = api_message(str(e), chat)
        return ApiError(400, message, param=param)
    if isinstance(e, ServerUnavailable):
        return ApiError(503, f"the model server is unavailable: {e}", type_="server_error")
    if isinstance(e, RequestTimeout):
        return ApiError(504, str(e), type_="server_error")
    return ApiError(500, str(e), type_="server_error")


def create_app(settings: FrontSettings) -> FastAPI:
    state: dict[str, AsyncLlmClient] = {}
    served_adapters: list[dict[str, int]] = []  # read once
    token_texts = TokenTexts(settings.tokenizer_dir) if settings.tokenizer_dir else None
    tool_format = settings.resolved_tool_call_format()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state["client"] = AsyncLlmClient(settings.grpc_url)
        yield
        await state["client"].close()

    app = FastAPI(title="Llama on Triton - OpenAI-compatible API", lifespan=lifespan)
    app.router.route_class = CheckedBodyRoute  # every route after this: bodies checked first (bodies.py)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=FrontMetrics())  # counts 413s too
    app.add_middleware(RequestContext)  # outermost: request id + span (openai_front/observability.py)
    telemetry.setup("openai-front")  # contract/telemetry.py: exports when OTEL_EXPORTER_OTLP_* is set

    def error_response(request: Request, e: ApiError, headers=None) -> JSONResponse:
        """The error in the shape of the route's API (Anthropic's on /v1/messages: errors.shaped)."""
        body, status = shaped(e, request.url.path)
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, e: ApiError):
        return error_response(request, e)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, e: RequestValidationError):
        return error_response(request, validation_error_body(e.errors()[0]))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException):
        """Starlette's own refusals (no such route, wrong method) in the OpenAI shape."""
        message = f"Invalid URL ({request.method} {request.url.path})" if e.status_code == 404 else str(e.detail)
        kind = "invalid_request_error" if e.status_code < 500 else "server_error"
        return error_response(request, ApiError(e.status_code, message, type_=kind), getattr(e, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception):
        """A bug still answers in the OpenAI shape (uvicorn logs the traceback)."""
        body = ApiError(500, f"internal error ({type(e).__name__}); see the front's log", type_="server_error")
        return error_response(request, body)

    async def authorized(request: Request) -> None:
        if settings.api_key is None:
            return
        header = request.headers.get("authorization", "")
        # x-api-key: the header Anthropic's clients send the key in (/v1/messages)
        token = header[7:] if header.lower().startswith("bearer ") else request.headers.get("x-api-key", "")
        if not hmac.compare_digest(token.encode(), settings.api_key.encode()):
            raise ApiError(401, "invalid or missing API key", type_="invalid_request_error", code="invalid_api_key")

    fingerprint: list[str] = []  # read once it is there (a repository older than it has none)

    async def system_fingerprint() -> str:
        if not fingerprint:
            value = await state["client"].system_fingerprint()
            if not value:
                return ""
            fingerprint.append(value)
        return fingerprint[0]

    async def adapters() -> dict[str, int]:
        """`<model>:<adapter>` -> lora_task_id of the adapters the engine serves (read once)."""
        if not served_adapters:
            served = await state["client"].lora_adapters()
            served_adapters.append({f"{settings.model_name}{lora.SEPARATOR}{name}": i for name, i in served.items()})
        return served_adapters[0]

    async def check_model(model: str, sampling):
        """The sampling with the model's LoRA adapter, or 404 naming what is served."""
        if model in (settings.model_name, names.ENSEMBLE):
            return sampling
        served = await adapters()
        if model in served:
            return dataclasses.replace(sampling, lora_task_id=served[model])
        raise ApiError(
            404,
            f"model {model!r} does not exist; this server serves {[settings.model_name, *served]}",
            param="model",
            code="model_not_found",
        )

    @app.get("/live")
    async def live():  # the process answers: the liveness probe (readiness is /health, Triton's too)
        return {"status": "ok"}

    @app.get("/health")
    async def health():
        ready = await state["client"].is_ready()
        return JSONResponse({"status": "ok" if ready else "unavailable"}, status_code=200 if ready else 503)

    @app.get("/v1/models", dependencies=[Depends(authorized)])
    async def models():
        ids = [settings.model_name, *(await adapters())]
        return {
            "object": "list",
            "data": [
                {
                    "id": i,
                    "object": "model",
                    "created": 0,
                    "owned_by": "llama-triton-kit",
                    **({"parent": settings.model_name} if i != settings.model_name else {}),
                }
                for i in ids
            ],
        }

    async def respond(
        request: Request,
        prompt,
        sampling,
        stream: bool,
        include_usage: bool,
        chat: bool,
        tools=None,
        continuous_usage: bool = False,
        response_id: str | None = None,
        prompt_shape=None,
        prompt_ids: list[int] | None = None,
    ):
        client = state["client"]
        if continuous_usage and tools is not None:
            raise unsupported("stream_options.continuous_usage_stats", "with 'tools' (the usage comes at the end)")
        if sampling.return_log_probs and token_texts is None:
            raise unsupported("logprobs", "start the front with --tokenizer (the checkpoint's tokenizer.json)")
        shaper = ResponseShaper(
            settings.model_name, chat, token_texts if sampling.return_log_probs else None, await system_fingerprint()
        )
        if prompt_shape is not None:  # echo with logprobs, max_tokens 0, prompt_logprobs
            if token_texts is None and prompt_shape.engine_k is not None:
                raise unsupported(
                    "prompt_logprobs" if prompt_shape.vllm is not None else "echo",
                    "start the front with --tokenizer (the checkpoint's tokenizer.json)",
                )
            shaper.prompt, shaper.prompt_texts = prompt_shape, token_texts
            shaper.prompt_text = prompt if isinstance(prompt, str) else ""
            shaper.prompt_ids = prompt_ids
        if response_id is not None:  # vLLM's request_id: `chatcmpl-<id>` / `cmpl-<id>`
            shaper.id = f"{'chatcmpl' if chat else 'cmpl'}-{response_id}"
        if tools is not None:
            return await tool_answer(
                request,
                ToolTurn(client, prompt, sampling, tools, settings.request_timeout_s),
                shaper,
                stream,
                include_usage,
            )
        if not stream:
            try:
                results = await client.generate_n(prompt, sampling, timeout_s=settings.request_timeout_s)
            except ClientError as e:
                raise as_asked(_client_error(e, chat), prompt_shape) from None
            return shaper.whole(results)
        chunks = client.stream(
            prompt, sampling, timeout_s=settings.request_timeout_s
        )  # the request's id (observability.py)
        try:
            first = await chunks.__anext__()  # errors before the first byte become HTTP errors
        except StopAsyncIteration:
            first = None
        except ClientError as e:
            raise _client_error(e, chat) from None
        events = _events(request, shaper, first, chunks, include_usage, chat, sampling.n, continuous_usage)
        return ClosingStreamingResponse(events, media_type="text/event-stream")

    async def _events(
        request: Request,
        shaper: ResponseShaper,
        first,
        chunks: AsyncGenerator,
        include_usage: bool,
        chat: bool,
        n: int,
        continuous_usage: bool = False,
    ):
        """SSE of n interleaved choices: each chunk is one choice's delta (its `index` is the
        engine's sequence_index); each choice gets one finish_reason; usage sums the choices
        (with continuous_usage, vLLM's continuous_usage_stats, every chunk carries it so far)."""
        finish: dict[int, str] = {}
        last: dict[int, StreamChunk] = {}
        prompt_tokens = first.num_input_tokens if first is not None else 0

        def counted(body: dict) -> dict:
            if continuous_usage:
                body["usage"] = usage(prompt_tokens, sum(c.num_output_tokens for c in last.values()))
            return body

        for opening in shaper.first_chunks(n):
            yield _sse(counted(opening))
        next_check = time.monotonic() + DISCONNECT_CHECK_S
        failed = False
        try:
            pending = [first] if first is not None else []
            while True:
                chunk = pending.pop() if pending else await chunks.__anext__()
                index = chunk.sequence_index
                last[index] = chunk
                if time.monotonic() >= next_check:
                    # uvicorn drops writes to a closed connection silently: ask.
                    if await request.is_disconnected():
                        return
                    next_check = time.monotonic() + DISCONNECT_CHECK_S
                if index not in finish:
                    reason = chunk.finish_reason or None
                    if reason:
                        finish[index] = reason
                    if chunk.text or reason or (shaper.token_texts and chunk.token_ids):
                        yield _sse(counted(shaper.chunk(chunk, reason)))
        except StopAsyncIteration:
            pass
        except ClientError as e:
            failed = True
            yield _sse(_client_error(e, chat).body())
        finally:
            await chunks.aclose()  # on a client disconnect this cancels the request on the server
        if failed:  # the error event ends the answer: no choice may look finished after it
            yield _sse("[DONE]")
            return
        for index, chunk in sorted(last.items()):
            if index not in finish:
                yield _sse(counted(shaper.chunk(dataclasses.replace(chunk, text="", token_ids=()), "stop")))
        if include_usage and last:
            prompt_tokens = next(iter(last.values())).num_input_tokens
            yield _sse(shaper.usage_chunk(prompt_tokens, sum(c.num_output_tokens for c in last.values())))
        yield _sse("[DONE]")

    async def tool_answer(request: Request, turn: ToolTurn, shaper: ResponseShaper, stream: bool, include_usage: bool):
        """A chat answer with tools (openai_front/tool_responses.py), whole or as SSE."""
        if not stream:
            try:
                return await turn.whole(shaper)
            except ClientError as e:
                raise _client_error(e, True) from None
        events = turn.events()
        first = await first_of(events, lambda e: _client_error(e, True))

        async def sse():
            for opening in shaper.first_chunks(turn.sampling.n):
                yield _sse(opening)
            try:
                async for event in watched(request, first, events):
                    yield _sse(turn.chunk(shaper, *event))
            except Disconnected:
                return
            except ClientError as e:
                yield _sse(_client_error(e, True).body())
                yield _sse("[DONE]")
                return
            if include_usage:
                yield _sse(shaper.envelope("chat.completion.chunk", [], usage=turn.usage()))
            yield _sse("[DONE]")

        return ClosingStreamingResponse(sse(), media_type="text/event-stream")

    @app.post("/v1/completions", dependencies=[Depends(authorized)])
    async def completions(req: CompletionRequest, request: Request):
        prompt, sampling = completion_input(req, token_texts.decode if token_texts else None)
        sampling = await check_model(req.model, with_priority_header(sampling, request.headers.get(PRIORITY_HEADER)))
        include_usage, continuous = req.stream_options.usage() if req.stream_options else (False, False)
        with engine_request_id(request, req.request_id) as response_id:
            return await respond(
                request,
                prompt,
                sampling,
                req.stream,
                include_usage,
                chat=False,
                continuous_usage=continuous,
                response_id=response_id,
                prompt_shape=completion_prompt_shape(req),
                prompt_ids=prompt_token_ids(req),
            )

    @app.post("/v1/chat/completions", dependencies=[Depends(authorized)])
    async def chat_completions(req: ChatCompletionRequest, request: Request):
        messages, sampling, plan = chat_turn(req, tool_format=tool_format, model=settings.model_name)
        sampling = await check_model(req.model, with_priority_header(sampling, request.headers.get(PRIORITY_HEADER)))
        include_usage, continuous = req.stream_options.usage() if req.stream_options else (False, False)
        with engine_request_id(request, req.request_id) as response_id:
            return await respond(
                request,
                messages,
                sampling,
                req.stream,
                include_usage,
                chat=True,
                tools=plan,
                continuous_usage=continuous,
                response_id=response_id,
                prompt_shape=chat_prompt_shape(req),
            )

    on_the_chat_path: dict[str, Any] = dict(  # the routes that answer through the chat path
        client=lambda: state["client"],
        check_model=check_model,
        authorized=authorized,
        request_timeout_s=settings.request_timeout_s,
        tool_format=tool_format,
        model_name=settings.model_name,
    )
    messages.register(app, **on_the_chat_path)
    responses.register(app, store_settings=settings.response_store, **on_the_chat_path)
    return app
