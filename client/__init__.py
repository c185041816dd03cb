"""Thin Python client of the deployed ensemble over gRPC: sync, asyncio and streaming."""

from client.aio_client import AsyncLlmClient
from client.errors import ClientError, InvalidRequestError, RequestCancelled, RequestTimeout, ServerUnavailable
from client.sync_client import LlmClient
from client.types import ChatMessage, GenerationResult, Guide, SamplingParams, StreamChunk

__all__ = [
    "AsyncLlmClient",
    "LlmClient",
    "ChatMessage",
    "GenerationResult",
    "Guide",
    "SamplingParams",
    "StreamChunk",
    "ClientError",
    "InvalidRequestError",
    "RequestCancelled",
    "RequestTimeout",
    "ServerUnavailable",
]
