"""The /v1/responses request body we accept.  Unknown fields are rejected (as on the chat
routes); fields we cannot honour are accepted here only to be refused with a message naming
them (openai_front/responses.py), never silently ignored."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ResponseCreateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    input: str | list[dict] = Field(default_factory=list)
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stream: bool = False
    tools: list[dict] | None = None
    tool_choice: str | dict | None = None
    parallel_tool_calls: bool | None = None
    text: dict | None = None  # {"format": {"type": "text" | "json_object" | "json_schema", ...}, "verbosity"}
    previous_response_id: str | None = None
    store: bool = True
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    stream_options: dict | None = None  # {"include_obfuscation": ...}: we never obfuscate
    # Refused unless they ask for the default (responses.py says why).
    include: list[str] | None = None
    reasoning: dict | None = None
    background: bool | None = None
    conversation: str | dict | None = None
    prompt: dict | None = None
    top_logprobs: int | None = None
    max_tool_calls: int | None = None
    service_tier: str | None = None
    # Extensions, as on the chat routes (vLLM accepts these on /v1/responses too).
    seed: int | None = Field(default=None, ge=0)
    top_k: int | None = Field(default=None, ge=0)
    stop: str | list[str] | None = None
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    priority: float | None = Field(default=None, ge=0.0, le=1.0)
