"""What the front is started with (openai_front/cli.py builds it; create_app serves it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contract import names, tool_formats
from openai_front.bodies import DEFAULT_MAX_BODY_BYTES
from openai_front.response_store import StoreSettings


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
