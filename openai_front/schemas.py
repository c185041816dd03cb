"""OpenAI request bodies we accept.  Unknown fields are rejected (as OpenAI does); what the
front does with each field the official SDK may send is openai_front/params.py's table."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from contract import sampling_fields
from contract.tensor_spec import DType


def _field(f: sampling_fields.SamplingField) -> Any:
    """(type, Field) of a sampling field at the front: OpenAI's bounds, null when not sent."""
    r = f.openai.bounds
    low, high = ("ge" if r.low_inclusive else "gt"), ("le" if r.high_inclusive else "lt")
    bounds: dict[str, Any] = {k: v for k, v in ((low, r.low), (high, r.high)) if v is not None}
    return ((float if f.dtype == DType.FP32 else int) | None, Field(default=None, **bounds))


# The sampling fields (contract/sampling_fields.py), the base of both endpoints' bodies.
_SAMPLING_FIELDS: dict[str, Any] = {f.name: _field(f) for f in sampling_fields.FIELDS}
SamplingBody: Any = create_model("SamplingBody", __config__=ConfigDict(extra="forbid"), **_SAMPLING_FIELDS)


class RequestBase(SamplingBody):
    model_config = ConfigDict(extra="forbid")

    model: str
    max_tokens: int | None = Field(default=None, ge=0)  # 0: /v1/completions with echo only (the prompt scored)
    stop: str | list[str] | None = None
    n: int = 1
    stream: bool = False
    user: str | None = None
    # Accepted and ignored when they ask for the default.
    logprobs: bool | int | None = None
    logit_bias: dict[str, float] | None = None
    # Extensions most OpenAI-compatible servers (vLLM, TGI) accept (and the sampling fields: SamplingBody).
    ignore_eos: bool = False
    skip_special_tokens: bool | None = None
    # vLLM's guided decoding extensions (regex and grammar have no OpenAI field).
    guided_json: dict | str | None = None
    guided_regex: str | None = None
    guided_grammar: str | None = None
    # Ours: admission order when the engine is full, [0, 1], higher first (TensorRT-LLM's
    # executor scale, default 0.5); also the X-Request-Priority header (the body wins).
    priority: float | None = Field(default=None, ge=0.0, le=1.0)
    # vLLM's: the engine request's id and the response's (openai_front/params.py VLLM_EXTENSIONS).
    request_id: str | None = None
    include_stop_str_in_output: bool = False
    guided_decoding_backend: str | None = None
    # vLLM's extensions the engines cannot honour: refused by name unless they ask for vLLM's
    # default (openai_front/params.py VLLM_EXTENSIONS says why for each).
    stop_token_ids: list[int] | None = None
    use_beam_search: bool | None = None
    length_penalty: float | None = None
    spaces_between_special_tokens: bool | None = None
    truncate_prompt_tokens: int | None = None
    prompt_logprobs: int | None = None
    allowed_token_ids: list[int] | None = None
    guided_choice: list[str] | None = None
    guided_whitespace_pattern: str | None = None
    structured_outputs: dict | None = None
    logits_processors: list | None = None
    return_tokens_as_token_ids: bool | None = None
    cache_salt: str | None = None
    kv_transfer_params: dict | None = None
    vllm_xargs: dict | None = None
    add_special_tokens: bool | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    include_usage: bool | None = None  # unset: False (OpenAI), True with continuous_usage_stats (vLLM)
    continuous_usage_stats: bool = False  # vLLM's: the usage so far on every chunk

    def usage(self) -> tuple[bool, bool]:
        """(a usage chunk at the end, usage on every chunk)."""
        continuous = self.continuous_usage_stats and self.include_usage is not False
        return bool(self.include_usage) or continuous, continuous


class CompletionRequest(RequestBase):
    prompt: str | list[str] | list[int] | list[list[int]]  # token ids: decoded by the front (--tokenizer)
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None
    stream_options: StreamOptions | None = None
    response_format: dict | None = None  # vLLM's extension on this endpoint
    prompt_embeds: Any = None


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
    # vLLM's chat extensions (openai_front/params.py VLLM_EXTENSIONS).
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    chat_template_kwargs: dict | None = None
    chat_template: str | None = None
    documents: list | None = None
    mm_processor_kwargs: dict | None = None
    echo: bool | None = None
    best_of: int | None = None
    bad_words: list[str] | None = None
    structural_tag: Any = None
    include_reasoning: bool | None = None
