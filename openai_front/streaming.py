"""The one SSE writer of every route that streams an answer (chat, completions, /v1/responses,
/v1/messages): the first event awaited before any byte goes out (so an engine error still becomes
an HTTP error), the disconnect checks while streaming, the response that cancels its request when
the client goes away; each API's Framing says what its events are."""

from __future__ import annotations

import json
import time
from typing import Any, AsyncGenerator, AsyncIterator, Callable, Iterable, Protocol

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


async def watched(request: Request, first, events: AsyncGenerator) -> AsyncGenerator:
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


def data_event(data: dict | str) -> str:
    """One server-sent event of OpenAI's chat and completions streams: `data:` and its JSON (or [DONE])."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


class Framing(Protocol):
    """One API's events of one streamed answer, as the engine's events come."""

    def opening(self, first: Any) -> Iterable[str]:
        """Before the first event (`first`, None when there is none)."""
        ...

    def event(self, event: Any) -> Iterable[str]: ...

    def failed(self, error: ClientError) -> Iterable[str]:
        """The engine failed mid-stream: the answer's last events."""
        ...

    def closing(self) -> Iterable[str]:
        """The engine's events ended."""
        ...


async def answer_stream(
    request: Request, events: AsyncGenerator, framing: Framing, error: Callable[[ClientError], ApiError]
) -> ClosingStreamingResponse:
    """`events` written as `framing` frames them; an engine error before the first event is
    raised as `error` makes it."""
    first = await first_of(events, error)
    return ClosingStreamingResponse(_written(request, first, events, framing), media_type="text/event-stream")


async def _written(request: Request, first, events: AsyncGenerator, framing: Framing) -> AsyncIterator[str]:
    stream = watched(request, first, events)
    try:
        for text in framing.opening(first):
            yield text
        try:
            async for event in stream:
                for text in framing.event(event):
                    yield text
        except Disconnected:
            return
        except ClientError as e:
            for text in framing.failed(e):
                yield text
            return
        for text in framing.closing():
            yield text
    finally:  # however it ends (the client gone too): the request is cancelled on the server
        await stream.aclose()
        await events.aclose()
