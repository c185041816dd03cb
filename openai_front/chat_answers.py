"""The answer of /v1/chat/completions and /v1/completions: whole, or streamed as OpenAI's chunks
through the one SSE writer (openai_front/streaming.py); a chat answer with tools comes from
openai_front/tool_responses.py's ToolTurn."""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from typing import Iterable, Iterator

from fastapi import Request

from client.errors import ClientError, InvalidRequestError, RequestTimeout, ServerUnavailable
from client.types import SamplingParams, StreamChunk
from contract import request_ids
from openai_front.errors import ApiError, api_message, unsupported
from openai_front.prompt_logprobs import PromptShape, as_asked
from openai_front.schemas import ChatCompletionRequest, CompletionRequest
from openai_front.served import Served
from openai_front.streaming import answer_stream, data_event
from openai_front.tool_responses import ToolTurn
from openai_front.tools import ToolPlan
from openai_front.translate import ResponseShaper, usage

TOKENIZER = "start the front with --tokenizer (the checkpoint's tokenizer.json)"


def client_error(e: ClientError, chat: bool) -> ApiError:
    if isinstance(e, InvalidRequestError):
        message, param = api_message(str(e), chat)
        return ApiError(400, message, param=param)
    if isinstance(e, ServerUnavailable):
        return ApiError(503, f"the model server is unavailable: {e}", type_="server_error")
    if isinstance(e, RequestTimeout):
        return ApiError(504, str(e), type_="server_error")
    return ApiError(500, str(e), type_="server_error")


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


@dataclasses.dataclass(frozen=True)
class Asked:
    """What a chat or completions request asks of its answer besides the prompt and sampling."""

    chat: bool
    tools: ToolPlan | None = None
    prompt_shape: PromptShape | None = None  # echo with logprobs, max_tokens 0, prompt_logprobs
    prompt_ids: list[int] | None = None  # a prompt sent as token ids
    # what every request of both routes says (ChatAnswers.answer reads them)
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False
    response_id: str | None = None  # vLLM's request_id: `chatcmpl-<id>` / `cmpl-<id>`


class ChatAnswers:
    """Answers chat and completions requests from what the app serves."""

    def __init__(self, served: Served) -> None:
        self.served = served

    async def answer(
        self,
        req: CompletionRequest | ChatCompletionRequest,
        request: Request,
        prompt,
        sampling: SamplingParams,
        asked: Asked,
    ):
        """The answer to `req`: its model and priority checked, then `asked` with its stream,
        stream_options and request_id."""
        sampling = await self.served.sampling_for(req.model, sampling, request)
        include_usage, continuous = req.stream_options.usage() if req.stream_options else (False, False)
        with engine_request_id(request, req.request_id) as response_id:
            asked = dataclasses.replace(
                asked,
                stream=req.stream,
                include_usage=include_usage,
                continuous_usage=continuous,
                response_id=response_id,
            )
            return await self.respond(request, prompt, sampling, asked)

    async def shaper(self, prompt, sampling: SamplingParams, asked: Asked) -> ResponseShaper:
        token_texts = self.served.token_texts
        if asked.continuous_usage and asked.tools is not None:
            raise unsupported("stream_options.continuous_usage_stats", "with 'tools' (the usage comes at the end)")
        if sampling.return_log_probs and token_texts is None:
            raise unsupported("logprobs", TOKENIZER)
        shaper = ResponseShaper(
            self.served.model_name,
            asked.chat,
            token_texts if sampling.return_log_probs else None,
            await self.served.system_fingerprint(),
        )
        shape = asked.prompt_shape
        if shape is not None:
            if token_texts is None and shape.engine_k is not None:
                raise unsupported("prompt_logprobs" if shape.vllm is not None else "echo", TOKENIZER)
            shaper.prompt, shaper.prompt_texts = shape, token_texts
            shaper.prompt_text = prompt if isinstance(prompt, str) else ""
            shaper.prompt_ids = asked.prompt_ids
        if asked.response_id is not None:
            shaper.id = f"{'chatcmpl' if asked.chat else 'cmpl'}-{asked.response_id}"
        return shaper

    async def respond(self, request: Request, prompt, sampling: SamplingParams, asked: Asked):
        shaper = await self.shaper(prompt, sampling, asked)
        client, timeout_s = self.served.client, self.served.request_timeout_s
        if asked.tools is not None:
            turn = ToolTurn(client, prompt, sampling, asked.tools, timeout_s)
            return await self.tool_answer(request, turn, shaper, asked)
        if not asked.stream:
            try:
                results = await client.generate_n(prompt, sampling, timeout_s=timeout_s)
            except ClientError as e:
                raise as_asked(client_error(e, asked.chat), asked.prompt_shape) from None
            return shaper.whole(results)
        chunks = client.stream(prompt, sampling, timeout_s=timeout_s)  # the request's id (observability.py)
        framing = ChoiceChunks(shaper, sampling.n, asked)
        return await answer_stream(request, chunks, framing, lambda e: client_error(e, asked.chat))

    async def tool_answer(self, request: Request, turn: ToolTurn, shaper: ResponseShaper, asked: Asked):
        """A chat answer with tools (openai_front/tool_responses.py), whole or as SSE."""
        if asked.stream:
            framing = ToolChunks(shaper, turn, asked.include_usage)
            return await answer_stream(request, turn.events(), framing, lambda e: client_error(e, True))
        messages, finish = await turn.answer(lambda e: client_error(e, True))
        choices = [
            {"index": i, "message": messages[i], "finish_reason": finish.get(i, "stop"), "logprobs": None}
            for i in range(turn.sampling.n)
        ]
        return shaper.envelope("chat.completion", choices, usage=turn.usage())


class ChoiceChunks:
    """SSE of n interleaved choices: each chunk is one choice's delta (its `index` is the
    engine's sequence_index); each choice gets one finish_reason; usage sums the choices
    (with continuous_usage, vLLM's continuous_usage_stats, every chunk carries it so far)."""

    def __init__(self, shaper: ResponseShaper, n: int, asked: Asked) -> None:
        self.shaper, self.n, self.asked = shaper, n, asked
        self.finish: dict[int, str] = {}
        self.last: dict[int, StreamChunk] = {}
        self.prompt_tokens = 0

    def _counted(self, body: dict) -> str:
        if self.asked.continuous_usage:
            body["usage"] = usage(self.prompt_tokens, sum(c.num_output_tokens for c in self.last.values()))
        return data_event(body)

    def opening(self, first: StreamChunk | None) -> Iterable[str]:
        self.prompt_tokens = first.num_input_tokens if first is not None else 0
        return [self._counted(opening) for opening in self.shaper.first_chunks(self.n)]

    def event(self, chunk: StreamChunk) -> Iterable[str]:
        index = chunk.sequence_index
        self.last[index] = chunk
        if index in self.finish:
            return []
        reason = chunk.finish_reason or None
        if reason:
            self.finish[index] = reason
        if chunk.text or reason or (self.shaper.token_texts and chunk.token_ids):
            return [self._counted(self.shaper.chunk(chunk, reason))]
        return []

    def failed(self, error: ClientError) -> Iterable[str]:
        # the error event ends the answer: no choice may look finished after it
        return [data_event(client_error(error, self.asked.chat).body()), data_event("[DONE]")]

    def closing(self) -> Iterable[str]:
        for index, chunk in sorted(self.last.items()):
            if index not in self.finish:
                yield self._counted(self.shaper.chunk(dataclasses.replace(chunk, text="", token_ids=()), "stop"))
        if self.asked.include_usage and self.last:
            prompt_tokens = next(iter(self.last.values())).num_input_tokens
            completion_tokens = sum(c.num_output_tokens for c in self.last.values())
            yield data_event(self.shaper.usage_chunk(prompt_tokens, completion_tokens))
        yield data_event("[DONE]")


class ToolChunks:
    """A chat answer with tools (ToolTurn.events: content or tool-call deltas) as chat chunks."""

    def __init__(self, shaper: ResponseShaper, turn: ToolTurn, include_usage: bool) -> None:
        self.shaper, self.turn, self.include_usage = shaper, turn, include_usage

    def opening(self, first) -> Iterable[str]:
        return [data_event(opening) for opening in self.shaper.first_chunks(self.turn.sampling.n)]

    def event(self, event: tuple[int, dict | None, str | None]) -> Iterable[str]:
        index, delta, reason = event
        choice = {"index": index, "delta": delta or {}, "finish_reason": reason, "logprobs": None}
        return [data_event(self.shaper.envelope("chat.completion.chunk", [choice]))]

    def failed(self, error: ClientError) -> Iterable[str]:
        return [data_event(client_error(error, True).body()), data_event("[DONE]")]

    def closing(self) -> Iterable[str]:
        if self.include_usage:
            yield data_event(self.shaper.envelope("chat.completion.chunk", [], usage=self.turn.usage()))
        yield data_event("[DONE]")
