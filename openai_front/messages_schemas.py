"""The /v1/messages (Anthropic Messages API) request body we accept.  Unknown fields are
rejected naming them; what the front does with each field is openai_front/messages.py's
FIELDS table (honoured, accepted and ignored, or refused by name), with the source of each.
Content blocks stay dicts here: messages.py reads them and names the block it refuses."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class MessagesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    max_tokens: int = Field(ge=0)  # required, as in Anthropic's API; 0 is refused by name (messages.py)
    messages: list[dict] = Field(min_length=1)
    system: str | list[dict] | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    temperature: float | None = Field(default=None, ge=0.0, le=1.0)  # Anthropic's range: 0-1
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    tools: list[dict] | None = None
    tool_choice: dict | None = None
    metadata: dict[str, Any] | None = None
    # Accepted and ignored (messages.py FIELDS says why for each).
    service_tier: str | None = None
    cache_control: dict | None = None
    inference_geo: str | None = None
    speed: str | None = None
    diagnostics: dict | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None
    # Refused unless they ask for the default (messages.py FIELDS).
    thinking: dict | None = None
    output_config: dict | None = None
    container: Any = None
    mcp_servers: list | None = None
    context_management: dict | None = None


class CountTokensRequest(BaseModel):
    """POST /v1/messages/count_tokens: the fields of anthropic 2.15.0's
    anthropic/types/message_count_tokens_params.py (a message request without max_tokens,
    sampling or streaming)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    messages: list[dict] = Field(min_length=1)
    system: str | list[dict] | None = None
    tools: list[dict] | None = None
    tool_choice: dict | None = None
    cache_control: dict | None = None
    speed: str | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None
    thinking: dict | None = None
    output_config: dict | None = None
    mcp_servers: list | None = None
    context_management: dict | None = None
