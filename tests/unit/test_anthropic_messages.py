"""/v1/messages (openai_front/messages.py): Anthropic's Messages API on the real app with a
scripted engine in place of Triton: the translation both ways, the stream's event sequence,
stop sequences matched in the front, refusals by name and errors in Anthropic's shape.  The
`anthropic` SDK itself runs against a live front in tests/integration/test_client_compat.py."""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.testclient import TestClient

from client.errors import InvalidRequestError, ServerUnavailable
from client.types import StreamChunk
from openai_front import app as front_app
from openai_front.app import FrontSettings, create_app
from openai_front.messages import chat_messages, stop_reason
from openai_front.messages_schemas import MessagesRequest
from openai_front.stop_sequences import StopSequenceClient, earliest, held_back

MODEL = "m"
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WORDS = ["Hello", " there,", " 日本", " friend."]


class Engine:
    """AsyncLlmClient's surface the front uses; records what each request asked for."""

    calls: list = []
    closed = 0

    def __init__(self, url: str) -> None:
        pass

    async def close(self):
        pass

    async def lora_adapters(self):
        return {}

    def answer(self, prompt, sampling) -> list[str]:
        type(self).calls.append((prompt, sampling))
        last = prompt[-1].content
        if "fail" in last:
            raise InvalidRequestError("in ensemble 'ensemble', invalid 'max_tokens': over the engine's max_seq_len")
        if sampling.guide is not None:
            schema = json.loads(sampling.guide.guide)
            if "anyOf" in schema:
                return ['{"name": "get_weather", ', '"arguments": {"city": "Oslo"}}']
            return ['{"city": ', '"Oslo"}']
        if "Oslo?" in last and "get_weather" in last:  # tool_choice auto: the model starts a call
            return ['{"name": "get_', 'weather", "parameters": {"city": "Oslo"}}']
        return WORDS[: sampling.max_tokens] if sampling.max_tokens else WORDS

    async def stream(self, prompt, sampling, *, timeout_s=None, request_id=None):
        parts = self.answer(prompt, sampling)
        length = sampling.max_tokens is not None and sampling.max_tokens <= len(parts)
        try:
            for i, text in enumerate(parts):
                if i == 2 and "crash" in prompt[-1].content:
                    raise ServerUnavailable("Triton went away")
                last = i == len(parts) - 1
                yield StreamChunk(text, ("length" if length else "stop") if last else "", 7, i + 1)
        finally:
            type(self).closed += 1


@pytest.fixture()
def front(monkeypatch):
    monkeypatch.setattr(front_app, "AsyncLlmClient", Engine)
    Engine.calls, Engine.closed = [], 0
    with TestClient(create_app(FrontSettings(grpc_url="127.0.0.1:1", model_name=MODEL, max_body_bytes=4096))) as c:
        yield c


def post(front, **body):
    return front.post("/v1/messages", json={"model": MODEL, "max_tokens": 16} | body)


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def events(response) -> list[tuple[str, dict]]:
    """(event name, data) of an SSE body; each data's type is its event's name."""
    out = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        data = json.loads(lines["data"])
        assert data["type"] == lines["event"]
        out.append((lines["event"], data))
    return out


# --- translation: Anthropic -> chat ------------------------------------------------------------
def test_blocks_become_chat_messages():
    req = MessagesRequest(
        model=MODEL,
        max_tokens=8,
        system=[{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Oslo?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "down", "is_error": True},
                    {"type": "text", "text": "And?"},
                ],
            },
        ],
    )
    assert chat_messages(req) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: down"},
        {"role": "user", "content": "And?"},
    ]


def test_sampling_reaches_the_engine(front):
    post(front, messages=ask("Hi"), max_tokens=3, temperature=0.5, top_p=0.9, top_k=4, system="Be brief.")
    prompt, sampling = Engine.calls[-1]
    assert (sampling.max_tokens, sampling.temperature, sampling.top_p, sampling.top_k) == (3, 0.5, 0.9, 4)
    assert prompt[0].role == "system" and prompt[0].content == "Be brief."
    assert sampling.stop == ()  # stop sequences are the front's (stop_sequences.py), never the engine's


# --- the answer: chat -> Anthropic -------------------------------------------------------------
def test_whole_text_answer_and_usage(front):
    body = post(front, messages=ask("Hi"), max_tokens=64).json()
    assert body["type"] == "message" and body["role"] == "assistant" and body["id"].startswith("msg_")
    assert body["content"] == [{"type": "text", "text": "".join(WORDS)}]
    assert (body["stop_reason"], body["stop_sequence"], body["model"]) == ("end_turn", None, MODEL)
    assert body["usage"] == {"input_tokens": 7, "output_tokens": 4}  # the engine's counts


def test_max_tokens_is_the_stop_reason(front):
    body = post(front, messages=ask("Hi"), max_tokens=2).json()
    assert body["stop_reason"] == "max_tokens" and body["content"][0]["text"] == "Hello there,"


def test_a_stop_sequence_across_chunks_is_named(front):
    body = post(front, messages=ask("Hi"), stop_sequences=["zzz", "o th"]).json()
    assert body["content"] == [{"type": "text", "text": "Hell"}]
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "o th")
    assert body["usage"]["output_tokens"] == 2  # generated up to the chunk that completed it
    assert Engine.closed == 1  # the engine's stream was closed there (the request cancelled)


def test_a_held_back_tail_that_is_no_stop_sequence_is_sent():
    assert held_back("Hello th", ("there!",)) == 2 and held_back("Hello", ("xyz",)) == 0
    assert earliest("a-b-c", ("c", "-b")) == (1, "-b")

    class Two:
        def stream(self, prompt, sampling, **kw):
            async def chunks():
                yield StreamChunk("ab", "", 1, 1)
                yield StreamChunk("c", "stop", 1, 2)

            return chunks()

    async def run():
        cut = StopSequenceClient(Two(), ("bd",))
        return [c.text async for c in cut.stream(None, None)], cut.matched

    assert asyncio.run(run()) == (["a", "bc"], None)


def test_stream_event_sequence(front):
    with front.stream(
        "POST", "/v1/messages", json={"model": MODEL, "max_tokens": 64, "stream": True, "messages": ask("Hi")}
    ) as response:
        response.read()
    seq = events(response)
    names = [name for name, _ in seq]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        *["content_block_delta"] * 4,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start = seq[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None and start["usage"]["input_tokens"] == 7
    assert seq[2][1] == {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    assert "".join(d["delta"]["text"] for n, d in seq if n == "content_block_delta") == "".join(WORDS)
    delta = seq[-2][1]
    assert delta["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert delta["usage"] == {"input_tokens": 7, "output_tokens": 4}


def test_streamed_stop_sequence(front):
    with front.stream(
        "POST",
        "/v1/messages",
        json={"model": MODEL, "max_tokens": 64, "stream": True, "messages": ask("Hi"), "stop_sequences": [" 日本"]},
    ) as response:
        response.read()
    seq = events(response)
    assert "".join(d["delta"]["text"] for n, d in seq if n == "content_block_delta") == "Hello there,"
    assert seq[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": " 日本"}


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}, {"type": "auto"}, None])
def test_tool_use_then_tool_result(front, choice):
    body = post(
        front, messages=ask("Weather in Oslo?"), tools=[WEATHER], **({"tool_choice": choice} if choice else {})
    ).json()
    assert body["stop_reason"] == "tool_use", body
    (call,) = [b for b in body["content"] if b["type"] == "tool_use"]
    assert call["name"] == "get_weather" and call["input"] == {"city": "Oslo"}
    answer = post(
        front,
        tools=[WEATHER],
        tool_choice={"type": "none"},
        messages=[
            *ask("Weather in Oslo?"),
            {"role": "assistant", "content": body["content"]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call["id"], "content": [{"type": "text", "text": "sunny"}]}
                ],
            },
        ],
    ).json()
    assert answer["stop_reason"] == "end_turn" and answer["content"][0]["type"] == "text"
    prompt, _ = Engine.calls[-1]
    assert [m.role for m in prompt][-2:] == ["assistant", "tool"] and prompt[-1].content == "sunny"


def test_streamed_tool_use_block(front):
    with front.stream(
        "POST",
        "/v1/messages",
        json={
            "model": MODEL,
            "max_tokens": 64,
            "stream": True,
            "messages": ask("Weather?"),
            "tools": [WEATHER],
            "tool_choice": {"type": "any"},
        },
    ) as response:
        response.read()
    seq = events(response)
    starts = [d["content_block"] for n, d in seq if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["tool_use"] and starts[0]["name"] == "get_weather"
    partial = "".join(d["delta"]["partial_json"] for n, d in seq if n == "content_block_delta")
    assert json.loads(partial) == {"city": "Oslo"}
    assert seq[-2][1]["delta"]["stop_reason"] == "tool_use"


# --- refusals and errors, in Anthropic's shape -------------------------------------------------
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"messages": [{"role": "user", "content": [IMAGE]}]}, "messages[0].content[0].type"),
        (
            {"messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]},
            "messages[0].content[0].type",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x", "citations": [{"a": 1}]}]}]},
            "messages[0].content[0].citations",
        ),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
        ({"output_config": {"effort": "low"}}, "output_config"),
        ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
        ({"messages": [*ask("Hi"), {"role": "assistant", "content": "The answer is"}]}, "messages[1]"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop_sequences": [""]}, "stop_sequences[0]"),
        ({"temperature": 1.5}, "temperature"),
        ({"frequency_penalty": 1}, "frequency_penalty"),
        ({"tool_choice": {"type": "auto"}, "tools": [WEATHER], "messages": ask("fail")}, "Invalid 'max_tokens': over"),
    ],
)
def test_refused_by_name_in_anthropic_shape(front, body, named):
    response = post(front, **({"messages": ask("Hi")} | body))
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert named in error["error"]["message"], error


def test_thinking_disabled_is_the_default(front):
    assert post(front, messages=ask("Hi"), thinking={"type": "disabled"}).status_code == 200


def test_errors_have_anthropic_statuses(front):
    missing = front.post("/v1/messages", json={"model": MODEL, "messages": ask("Hi")})
    assert missing.status_code == 400 and "max_tokens" in missing.json()["error"]["message"]
    unknown = post(front, model="claude-opus-4", messages=ask("Hi"))
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"
    down = post(front, messages=ask("crash"), max_tokens=1)  # fails only at the third chunk: fine
    assert down.status_code == 200
    crash = post(front, messages=ask("crash"))
    assert crash.status_code == 529 and crash.json()["error"]["type"] == "overloaded_error"
    body = front.post("/v1/messages", content=b'{"model": ', headers={"content-type": "application/json"})
    assert body.status_code == 400 and body.json()["type"] == "error"
    big = front.post(
        "/v1/messages",
        content=json.dumps({"model": MODEL, "max_tokens": 1, "messages": ask("a" * 5000)}),
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413 and big.json()["error"]["type"] == "request_too_large"
    lone = front.post("/v1/messages", content=b'{"model": "m", "max_tokens": 1, "messages": [{"role": "user", '
                      b'"content": "\\ud800 hi"}]}', headers={"content-type": "application/json"})
    assert lone.status_code == 400 and "messages[0].content" in lone.json()["error"]["message"], lone.text
    deep = front.post("/v1/messages", content=b"[" * 100 + b"]" * 100, headers={"content-type": "application/json"})
    assert deep.status_code == 400 and deep.json()["error"]["type"] == "invalid_request_error"
    route = front.get("/v1/messages/batches")
    assert route.json()["type"] == "error" and route.json()["error"]["type"] in (
        "not_found_error",
        "invalid_request_error",
    )
    # the other routes keep the OpenAI shape
    chat = front.post("/v1/chat/completions", json={"model": "nope", "messages": ask("Hi")})
    assert chat.status_code == 404 and chat.json()["error"]["code"] == "model_not_found"


def test_an_error_mid_stream_is_an_error_event(front):
    with front.stream(
        "POST", "/v1/messages", json={"model": MODEL, "max_tokens": 64, "stream": True, "messages": ask("crash")}
    ) as response:
        response.read()
    seq = events(response)
    assert seq[-1][0] == "error" and seq[-1][1]["error"]["type"] == "overloaded_error"
    assert "message_stop" not in [n for n, _ in seq]


def test_x_api_key_authenticates(monkeypatch):
    monkeypatch.setattr(front_app, "AsyncLlmClient", Engine)
    with TestClient(create_app(FrontSettings(grpc_url="127.0.0.1:1", model_name=MODEL, api_key="k"))) as c:
        body = {"model": MODEL, "max_tokens": 4, "messages": ask("Hi")}
        refused = c.post("/v1/messages", json=body)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
        assert c.post("/v1/messages", json=body, headers={"x-api-key": "k"}).status_code == 200


def test_stop_reason_mapping():
    assert [stop_reason(f, m) for f, m in [("stop", None), ("stop", "x"), ("length", None), ("tool_calls", None)]] == [
        "end_turn",
        "stop_sequence",
        "max_tokens",
        "tool_use",
    ]


def test_count_tokens_is_the_engines_count_of_the_same_prompt(front):
    body = {"model": MODEL, "messages": ask("Weather in Oslo?"), "system": "Be brief.", "tools": [WEATHER]}
    counted = front.post("/v1/messages/count_tokens", json=body)
    assert counted.json() == {"input_tokens": 7}  # the scripted engine's num_input_tokens
    prompt, sampling = Engine.calls[-1]
    assert sampling.max_tokens == 1 and sampling.guide is None
    post(front, **{k: v for k, v in body.items() if k != "model"})
    assert len(Engine.calls) > 1 and Engine.calls[1][0] == prompt  # the prompt /v1/messages sends, tools described
    refused = front.post("/v1/messages/count_tokens", json=body | {"max_tokens": 5})
    assert refused.status_code == 400 and "max_tokens" in refused.json()["error"]["message"]
    unknown = front.post("/v1/messages/count_tokens", json=body | {"model": "claude-opus-4"})
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found_error"


def test_every_field_has_a_row_and_every_refused_field_is_refused(front):
    from openai_front.messages import FIELDS, REFUSE

    assert set(FIELDS) == set(MessagesRequest.model_fields)  # a new field fails here until it is decided
    for name in [n for n, f in FIELDS.items() if f.action == REFUSE]:
        value = [{"x": 1}] if name == "mcp_servers" else {"type": "enabled"}
        response = post(front, messages=ask("Hi"), **{name: value})
        assert response.status_code == 400 and f"'{name}'" in response.json()["error"]["message"], name
