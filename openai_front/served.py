"""What every route answers from: the settings, the engine's client (set while the app runs),
the tokenizer's token texts, the served tool-call format, and the checks every route makes
(the API key; the model or its LoRA adapter, with the priority header)."""

from __future__ import annotations

import dataclasses
import hmac

from fastapi import Request

from client import AsyncLlmClient
from client.types import SamplingParams
from contract import lora, names
from openai_front.errors import ApiError
from openai_front.logprobs import TokenTexts
from openai_front.settings import FrontSettings
from openai_front.translate import PRIORITY_HEADER, with_priority_header


class Served:
    def __init__(self, settings: FrontSettings) -> None:
        self.settings = settings
        self.model_name = settings.model_name
        self.request_timeout_s = settings.request_timeout_s
        self.token_texts = TokenTexts(settings.tokenizer_dir) if settings.tokenizer_dir else None
        self.tool_format = settings.resolved_tool_call_format()
        self._client: AsyncLlmClient | None = None  # the app's lifespan sets it
        self._fingerprint = ""  # read once it is there (a repository older than it has none)
        self._adapters: dict[str, int] | None = None  # read once

    @property
    def client(self) -> AsyncLlmClient:
        assert self._client is not None, "the app is not running"
        return self._client

    @client.setter
    def client(self, client: AsyncLlmClient | None) -> None:
        self._client = client

    async def authorized(self, request: Request) -> None:
        key = self.settings.api_key
        if key is None:
            return
        header = request.headers.get("authorization", "")
        # x-api-key: the header Anthropic's clients send the key in (/v1/messages)
        token = header[7:] if header.lower().startswith("bearer ") else request.headers.get("x-api-key", "")
        if not hmac.compare_digest(token.encode(), key.encode()):
            raise ApiError(401, "invalid or missing API key", type_="invalid_request_error", code="invalid_api_key")

    async def system_fingerprint(self) -> str:
        if not self._fingerprint:
            self._fingerprint = await self.client.system_fingerprint() or ""
        return self._fingerprint

    async def adapters(self) -> dict[str, int]:
        """`<model>:<adapter>` -> lora_task_id of the adapters the engine serves (read once)."""
        if self._adapters is None:
            served = await self.client.lora_adapters()
            self._adapters = {f"{self.model_name}{lora.SEPARATOR}{name}": i for name, i in served.items()}
        return self._adapters

    async def sampling_for(self, model: str, sampling: SamplingParams, request: Request) -> SamplingParams:
        """The sampling with the X-Request-Priority header and the model's LoRA adapter, or 404
        naming what is served."""
        sampling = with_priority_header(sampling, request.headers.get(PRIORITY_HEADER))
        if model in (self.model_name, names.ENSEMBLE):
            return sampling
        served = await self.adapters()
        if model in served:
            return dataclasses.replace(sampling, lora_task_id=served[model])
        raise ApiError(
            404,
            f"model {model!r} does not exist; this server serves {[self.model_name, *served]}",
            param="model",
            code="model_not_found",
        )
