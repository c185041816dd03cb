"""OpenAI requests -> our client's (prompt, SamplingParams); our results -> OpenAI bodies."""

from __future__ import annotations

import time
import uuid

from client.types import ChatMessage, GenerationResult, SamplingParams, StreamChunk
from openai_front.errors import invalid, unsupported
from openai_front.schemas import ChatCompletionRequest, CompletionRequest, _Request


def _common_checks(req: _Request) -> None:
    if req.n != 1:
        raise unsupported("n", "only n=1")
    if req.logprobs:
        raise unsupported("logprobs")
    if req.logit_bias:
        raise unsupported("logit_bias")


def _sampling(req: _Request, max_tokens: int | None, echo: bool = False) -> SamplingParams:
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    min_tokens = req.min_tokens
    if req.ignore_eos:
        if max_tokens is None:
            raise invalid("'ignore_eos' needs 'max_tokens'", "ignore_eos")
        min_tokens = max_tokens
    return SamplingParams(
        max_tokens=max_tokens, temperature=req.temperature, top_p=req.top_p, top_k=req.top_k, min_tokens=min_tokens,
        seed=req.seed, repetition_penalty=req.repetition_penalty, presence_penalty=req.presence_penalty,
        frequency_penalty=req.frequency_penalty, stop=stop, skip_special_tokens=req.skip_special_tokens, echo=echo,
    )


def completion_input(req: CompletionRequest) -> tuple[str, SamplingParams]:
    _common_checks(req)
    if req.best_of not in (None, 1):
        raise unsupported("best_of", "only 1")
    if req.suffix:
        raise unsupported("suffix")
    prompt = req.prompt
    if isinstance(prompt, list):
        if len(prompt) != 1:
            raise unsupported("prompt", "send one prompt per request (a list of one string is fine)")
        prompt = prompt[0]
    return prompt, _sampling(req, req.max_tokens, echo=req.echo)


def _content(message, index: int) -> str:
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    texts = []
    for part in message.content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise unsupported(f"messages[{index}].content", "only text parts")
        texts.append(part["text"])
    return "".join(texts)


def chat_input(req: ChatCompletionRequest) -> tuple[list[ChatMessage], SamplingParams]:
    _common_checks(req)
    for name in ("tools", "functions", "tool_choice", "top_logprobs"):
        if getattr(req, name):
            raise unsupported(name)
    if req.response_format and req.response_format.get("type") not in (None, "text"):
        raise unsupported("response_format", "only {'type': 'text'}")
    messages = [ChatMessage("system" if m.role == "developer" else m.role, _content(m, i))
                for i, m in enumerate(req.messages)]
    return messages, _sampling(req, req.max_completion_tokens or req.max_tokens)


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


class ResponseShaper:
    """Builds the bodies of one response (shared id, created, model)."""

    def __init__(self, model: str, chat: bool) -> None:
        self.chat = chat
        self.id = new_id("chatcmpl" if chat else "cmpl")
        self.created = int(time.time())
        self.model = model

    def _envelope(self, obj: str, choices: list[dict], **extra) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model, "choices": choices} | extra

    def whole(self, result: GenerationResult) -> dict:
        finish = result.finish_reason or "stop"
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": result.text}, "finish_reason": finish,
                      "logprobs": None}
            return self._envelope("chat.completion", [choice], usage=usage(result.prompt_tokens, result.completion_tokens))
        choice = {"index": 0, "text": result.text, "finish_reason": finish, "logprobs": None}
        return self._envelope("text_completion", [choice], usage=usage(result.prompt_tokens, result.completion_tokens))

    def first_chunk(self) -> dict | None:
        if not self.chat:
            return None
        return self._envelope("chat.completion.chunk", [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                         "finish_reason": None, "logprobs": None}])

    def chunk(self, chunk: StreamChunk, finish_reason: str | None) -> dict:
        if self.chat:
            delta = {"content": chunk.text} if chunk.text else {}
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return self._envelope("chat.completion.chunk", [choice])
        choice = {"index": 0, "text": chunk.text, "finish_reason": finish_reason, "logprobs": None}
        return self._envelope("text_completion", [choice])

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> dict:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return self._envelope(obj, [], usage=usage(prompt_tokens, completion_tokens))
