"""openai_front/streaming.py's one SSE writer (answer_stream) and openai_front/other_apis.py's
renaming of the chat path's errors, without an app."""

from __future__ import annotations

import asyncio

import pydantic
import pytest

from client.errors import ServerUnavailable
from openai_front import streaming
from openai_front.errors import ApiError, invalid
from openai_front.other_apis import Renaming, chat_tools, joined_text


class Framed:
    """A Framing that writes what it is given."""

    def opening(self, first):
        return [f"open {first}"]

    def event(self, event):
        return [f"event {event}"]

    def failed(self, error):
        return [f"failed {error}"]

    def closing(self):
        yield "close"


class Request:
    def __init__(self, gone_after: int | None = None) -> None:
        self.asked, self.gone_after = 0, gone_after

    async def is_disconnected(self) -> bool:
        self.asked += 1
        return self.gone_after is not None and self.asked > self.gone_after


class Engine:
    """An engine's event stream that records whether it was closed."""

    def __init__(self, events, fail_at: int | None = None) -> None:
        self.events, self.fail_at, self.closed = events, fail_at, False

    async def stream(self):
        try:
            for i, event in enumerate(self.events):
                if i == self.fail_at:
                    raise ServerUnavailable("gone")
                yield event
        finally:
            self.closed = True


def _error(e) -> ApiError:
    return ApiError(503, f"unavailable: {e}", type_="server_error")


async def _written(request, engine: Engine, take: int | None = None) -> list[str]:
    response = await streaming.answer_stream(request, engine.stream(), Framed(), _error)
    body = response.body_iterator
    texts = []
    async for text in body:
        texts.append(text)
        if take is not None and len(texts) == take:
            break
    await body.aclose()  # as ClosingStreamingResponse does however the response ends
    return texts


def test_the_events_framed_in_order_and_the_engine_closed():
    engine = Engine([1, 2, 3])
    assert asyncio.run(_written(Request(), engine)) == ["open 1", "event 1", "event 2", "event 3", "close"]
    assert engine.closed


def test_an_error_before_the_first_event_is_the_routes_error():
    with pytest.raises(ApiError) as raised:
        asyncio.run(_written(Request(), Engine([1], fail_at=0)))
    assert raised.value.status == 503


def test_an_error_mid_stream_ends_it_with_the_framings_failure():
    engine = Engine([1, 2, 3], fail_at=2)
    assert asyncio.run(_written(Request(), engine)) == ["open 1", "event 1", "event 2", "failed gone"]
    assert engine.closed


def test_a_client_gone_stops_the_answer_and_closes_the_engine(monkeypatch):
    monkeypatch.setattr(streaming, "DISCONNECT_CHECK_S", 0.0)  # ask before every event after the first
    engine = Engine([1, 2, 3, 4])
    assert asyncio.run(_written(Request(gone_after=1), engine)) == ["open 1", "event 1", "event 2"]
    assert engine.closed


def test_a_response_closed_early_closes_the_engine():
    engine = Engine([1, 2, 3])
    assert asyncio.run(_written(Request(), engine, take=2)) == ["open 1", "event 1"]
    assert engine.closed


NAMES = Renaming({"max_tokens": "max_output_tokens", "top_p": "top_p"},
                 param=lambda p: p.replace("max_tokens", "max_output_tokens"), param_at=lambda loc: loc or "input",
                 phrases={"tool_choice 'none'": "tool_choice {'type': 'none'}"})


def test_an_error_of_the_chat_path_in_the_other_apis_names():
    renamed = NAMES.error(ApiError(400, "'max_tokens' is too large; send tool_choice 'none'", param="max_tokens",
                                   code="c"))
    assert renamed.message == "'max_output_tokens' is too large; send tool_choice {'type': 'none'}"
    assert (renamed.status, renamed.param, renamed.code) == (400, "max_output_tokens", "c")
    assert NAMES.error(ApiError(400, "'top_p' bad")).param is None


def test_spoken_renames_api_errors_and_validation_errors():
    with pytest.raises(ApiError) as raised, NAMES.spoken():
        raise invalid("'max_tokens' must be positive", "max_tokens")
    assert raised.value.param == "max_output_tokens"

    class Body(pydantic.BaseModel):
        n: int

    with pytest.raises(ApiError) as raised, NAMES.spoken():
        Body.model_validate({"n": "x"})
    assert raised.value.param == "n" and raised.value.message.startswith("n: ")


def test_text_and_tools_read_part_by_part():
    def text(part, where):
        if part.get("type") != "text":
            raise invalid(f"'{where}' is not text", where)
        return part["text"]

    assert joined_text("plain", "input", "parts", text) == "plain"
    assert joined_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "input", "parts", text) == "ab"
    with pytest.raises(ApiError) as raised:
        joined_text([{"type": "text", "text": "a"}, {"type": "image"}], "input", "parts", text)
    assert raised.value.param == "input[1]"
    with pytest.raises(ApiError, match="a string or a list of parts"):
        joined_text(3, "input", "parts", text)
    assert chat_tools(None, lambda tool, where: tool) is None
    assert chat_tools([{"name": "f"}], lambda tool, where: {**tool, "at": where}) == [
        {"type": "function", "function": {"name": "f", "at": "tools[0]"}}]
