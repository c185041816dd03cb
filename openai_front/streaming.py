"""What the chat route and /v1/responses share when they stream an answer: the response that
cancels its request when the client goes away, the first event awaited before any byte goes out
(so an engine error still becomes an HTTP error), and the disconnect checks while streaming."""

from __future__ import annotations

import time
from typing import AsyncGenerator, AsyncIterator, Callable

from fastapi import Request
from fastapi.responses import StreamingResponse

from client.errors import ClientError
from openai_front.errors import ApiError

DISCONNECT_CHECK_S = 0.2


class ClosingStreamingResponse(StreamingResponse):
    """Closes its generator however the response ends.  When the client goes away,
    Starlette stops iterating but leaves the generator to the garbage collector, so the
    request would go on generating on the server; closing it cancels the request."""

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()  # type: ignore[attr-defined]  # Starlette types it as an AsyncIterable; ours are generators


class Disconnected(Exception):
    """The client went away mid-stream (watched() noticed)."""


async def first_of(events: AsyncIterator, error: Callable[[ClientError], ApiError]):
    """The first event of `events` (None when there is none); an engine error before it is
    raised as its ApiError, so it becomes an HTTP error rather than an event."""
    try:
        return await events.__anext__()
    except StopAsyncIteration:
        return None
    except ClientError as e:
        raise error(e) from None


async def watched(request: Request, first, events: AsyncGenerator) -> AsyncIterator:
    """`first` (unless None), then the rest of `events`; raises Disconnected when the client
    went away (uvicorn drops writes to a closed connection silently: ask) and closes `events`
    however it ends, which cancels the request on the server.  Engine errors pass through."""
    next_check = time.monotonic() + DISCONNECT_CHECK_S
    try:
        if first is not None:
            yield first
        async for event in events:
            if time.monotonic() >= next_check:
                if await request.is_disconnected():
                    raise Disconnected
                next_check = time.monotonic() + DISCONNECT_CHECK_S
            yield event
    finally:
        await events.aclose()
