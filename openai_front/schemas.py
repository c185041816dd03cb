"""OpenAI request bodies we accept.  Unknown fields are rejected (as OpenAI does); what the
front does with each field the official SDK may send is openai_front/params.py's table."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class RequestBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=0)
    n: int = 1
    stream: bool = False
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    user: str | None = None
    # Accepted and ignored when they ask for the default.
    logprobs: bool | int | None = None
    logit_bias: dict[str, float] | None = None
    # Extensions most OpenAI-compatible servers (vLLM, TGI) accept.
    top_k: int | None = Field(default=None, ge=0)
    min_tokens: int | None = Field(default=None, ge=0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    ignore_eos: bool = False
    skip_special_tokens: bool | None = None
    # vLLM's guided decoding extensions (regex and grammar have no OpenAI field).
    guided_json: dict | str | None = None
    guided_regex: str | None = None
    guided_grammar: str | None = None
    # Ours: admission order when the engine is full, [0, 1], higher first (TensorRT-LLM's
    # executor scale, default 0.5); also the X-Request-Priority header (the body wins).
    priority: float | None = Field(default=None, ge=0.0, le=1.0)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool = False


class CompletionRequest(RequestBase):
    prompt: str | list[str]
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None
    stream_options: StreamOptions | None = None


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict] | None = None
    name: str | None = None
    tool_calls: list[dict] | None = None  # an assistant's earlier calls
    tool_call_id: str | None = None  # a tool message answers this call


class ChatCompletionRequest(RequestBase):
    messages: list[ChatMessageIn] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stream_options: StreamOptions | None = None
    top_logprobs: int | None = None
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None
    response_format: dict | None = None
    parallel_tool_calls: bool | None = None
    # The rest of the SDK's parameters: accepted and ignored, or refused unless they ask for the
    # default (openai_front/params.py).
    functions: list[dict] | None = None
    function_call: Any = None
    store: bool | None = None
    metadata: dict[str, str] | None = None
    service_tier: str | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None
    prediction: dict | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    prompt_cache_options: dict | None = None
    safety_identifier: str | None = None
    modalities: list[str] | None = None
    audio: dict | None = None
    web_search_options: dict | None = None
    moderation: Any = None
