"""Stop sequences matched in the front, so the answer can say WHICH one stopped it.

Anthropic's Messages API answers `stop_reason: "stop_sequence"` and `stop_sequence: <the
matched one>` (anthropic 2.15.0, anthropic/types/message_create_params.py `stop_sequences`);
the ensemble's stop words end the answer without saying whether a stop word or the end token
did (postprocessing's finish reason is "stop" for both: contract/finish.py).  So /v1/messages
sends no stop words to the engine: `StopSequenceClient` wraps the client's stream, cuts the
text before the earliest stop sequence (holding back a tail that may be the start of one, as
postprocessing's StopStringMatcher does), ends the stream there with finish "stop" and closes
the engine's stream, which cancels the request.  Token counts are the engine's, as of the chunk
that completed the stop sequence (its tokens were generated, as Anthropic counts them)."""

from __future__ import annotations

import dataclasses
from typing import AsyncGenerator

from client.types import StreamChunk


def earliest(text: str, stops: tuple[str, ...]) -> tuple[int, str] | None:
    """(where, which) of the stop sequence that starts first in `text` (the longest at a tie)."""
    found = [(text.find(s), -len(s), s) for s in stops if s in text]
    if not found:
        return None
    at, _, stop = min(found)
    return at, stop


def held_back(text: str, stops: tuple[str, ...]) -> int:
    """How many characters at the end of `text` may begin a stop sequence."""
    for size in range(min(len(text), max(len(s) for s in stops) - 1), 0, -1):
        tail = text[-size:]
        if any(s.startswith(tail) for s in stops):
            return size
    return 0


class StopSequenceClient:
    """The client's `stream` with stop sequences matched here; `matched` is the one that ended the
    latest stream (None: the engine ended it)."""

    def __init__(self, client, stops: tuple[str, ...]) -> None:
        self.client, self.stops = client, stops
        self.matched: str | None = None

    def stream(self, prompt, sampling, **kwargs) -> AsyncGenerator[StreamChunk, None]:
        return self._cut(self.client.stream(prompt, sampling, **kwargs))

    async def _cut(self, chunks: AsyncGenerator[StreamChunk, None]) -> AsyncGenerator[StreamChunk, None]:
        self.matched = None
        held, last = "", None
        try:
            async for chunk in chunks:
                last = chunk
                text = held + chunk.text
                found = earliest(text, self.stops)
                if found is not None:
                    self.matched = found[1]
                    yield dataclasses.replace(chunk, text=text[: found[0]], finish_reason="stop")
                    return
                if chunk.finish_reason:
                    yield dataclasses.replace(chunk, text=text)
                    return
                keep = held_back(text, self.stops)
                held = text[len(text) - keep :] if keep else ""
                yield dataclasses.replace(chunk, text=text[: len(text) - keep])
            if held and last is not None:  # a stream that ended without a finish reason
                yield dataclasses.replace(last, text=held)
        finally:
            await chunks.aclose()  # a stop sequence matched: cancels the engine's request
