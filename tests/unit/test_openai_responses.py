"""/v1/responses (openai_front/responses.py) on the real app and the official `openai` SDK,
with a scripted engine in place of Triton; and the response store's bounds."""

from __future__ import annotations

import json

import openai
import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel

from client.errors import InvalidRequestError, ServerUnavailable
from client.types import StreamChunk
from openai_front import app as front_app
from openai_front.app import FrontSettings, create_app
from openai_front.response_store import ResponseStore, StoreSettings

MODEL = "m"
WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


class ScriptedEngine:
    """AsyncLlmClient's surface the front uses: answers by what the request asks for."""

    calls: list = []

    def __init__(self, url: str) -> None:
        self.closed = 0

    async def close(self):
        pass

    async def is_ready(self):
        return True

    async def lora_adapters(self):
        return {}

    async def system_fingerprint(self):
        return ""

    def answer(self, prompt, sampling) -> list[str]:
        type(self).calls.append((prompt, sampling))
        if "fail" in prompt[-1].content:
            raise InvalidRequestError("'text_input' is too long for the engine")
        if sampling.guide is None and "Oslo?" in prompt[-1].content and "get_weather" in prompt[-1].content:
            return ['{"name": "get_', 'weather", "parameters": {"city": "Oslo"}}']  # tool_choice auto: a call
        if sampling.guide is not None:
            schema = json.loads(sampling.guide.guide)
            if "anyOf" in schema:
                return ['{"name": "get_weather", ', '"arguments": {"city": "Oslo"}}']
            if "city" in schema.get("properties", {}):
                return ['{"city": ', '"Oslo"}']
            return ['{"answer": ', '42}']
        words = ["Hello", " there,", " 日本", " friend."]
        return words[:sampling.max_tokens] if sampling.max_tokens else words

    async def stream(self, prompt, sampling, *, timeout_s=None, request_id=None):
        parts = self.answer(prompt, sampling)
        length = sampling.max_tokens is not None and sampling.max_tokens <= len(parts)
        for i, text in enumerate(parts):
            if i == 2 and "crash" in prompt[-1].content:
                raise ServerUnavailable("Triton went away")
            last = i == len(parts) - 1
            yield StreamChunk(text, ("length" if length else "stop") if last else "", 7, i + 1)

    async def generate_n(self, prompt, sampling, *, timeout_s=None):
        from client.types import GenerationResult

        chunks = [c async for c in self.stream(prompt, sampling)]
        return [GenerationResult("".join(c.text for c in chunks), chunks[-1].finish_reason, 7, len(chunks), None, 0.1)]


def _front(monkeypatch, **settings):
    monkeypatch.setattr(front_app, "AsyncLlmClient", ScriptedEngine)
    ScriptedEngine.calls = []
    return TestClient(create_app(FrontSettings(grpc_url="127.0.0.1:1", model_name=MODEL, **settings)))


@pytest.fixture()
def oai(monkeypatch):
    with _front(monkeypatch) as http:
        yield openai.OpenAI(base_url="http://testserver/v1", api_key="x", http_client=http, max_retries=0)


def test_text_usage_and_echoed_fields(oai):
    r = oai.responses.create(model=MODEL, input="Hi", instructions="Be brief.", max_output_tokens=32,
                             temperature=0, metadata={"k": "v"})
    assert r.object == "response" and r.status == "completed" and r.id.startswith("resp_")
    assert r.output_text == "Hello there, 日本 friend."
    assert r.output[0].type == "message" and r.output[0].role == "assistant" and r.output[0].status == "completed"
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (7, 4, 11)
    assert r.metadata == {"k": "v"} and r.instructions == "Be brief." and r.max_output_tokens == 32
    prompt, sampling = ScriptedEngine.calls[-1]
    assert [(m.role, m.content) for m in prompt] == [("system", "Be brief."), ("user", "Hi")]
    assert sampling.max_tokens == 32 and sampling.temperature == 0


def test_max_output_tokens_makes_it_incomplete(oai):
    r = oai.responses.create(model=MODEL, input="Hi", max_output_tokens=2)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output_text == "Hello there,"


def test_stream_events_in_openai_order(oai):
    events = list(oai.responses.create(model=MODEL, input="Hi", stream=True))
    types = [e.type for e in events]
    assert types == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.content_part.added"] + ["response.output_text.delta"] * 4 + [
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == final.output_text
    assert events[2].item.id == final.output[0].id == events[4].item_id
    assert final.usage.output_tokens == 4


def test_a_failure_mid_stream_ends_with_error_and_failed(oai):
    events = list(oai.responses.create(model=MODEL, input="crash", stream=True))
    assert [e.type for e in events][-4:] == ["response.output_text.delta", "response.output_text.delta", "error",
                                             "response.failed"]
    assert "unavailable" in events[-2].message and events[-1].response.status == "failed"
    assert events[-1].response.error.code == "server_error"


def test_stream_helper_and_whole_agree(oai):
    whole = oai.responses.create(model=MODEL, input="Hi")
    with oai.responses.stream(model=MODEL, input="Hi") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == whole.output_text


class City(BaseModel):
    city: str


def test_structured_output_with_parse(oai):
    r = oai.responses.parse(model=MODEL, input="Where?", text_format=City)
    assert r.output_parsed == City(city="Oslo")
    guide = ScriptedEngine.calls[-1][1].guide
    assert guide.type == "json_schema" and json.loads(guide.guide)["required"] == ["city"]
    r = oai.responses.create(model=MODEL, input="JSON please", text={"format": {"type": "json_object"}})
    assert json.loads(r.output_text) == {"answer": 42}


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "name": "get_weather"}])
def test_function_call_round_trip(oai, tool_choice):
    first = oai.responses.create(model=MODEL, input="Weather in Oslo?", tools=[WEATHER], tool_choice=tool_choice)
    call = first.output[0]
    assert call.type == "function_call" and call.name == "get_weather" and json.loads(call.arguments) == {"city": "Oslo"}
    second = oai.responses.create(model=MODEL, previous_response_id=first.id, input=[
        {"type": "function_call_output", "call_id": call.call_id, "output": "12 C, rain"}])
    assert second.previous_response_id == first.id and second.output_text
    prompt = ScriptedEngine.calls[-1][0]
    assert [m.role for m in prompt] == ["user", "assistant", "tool"]
    assert prompt[2].content == "12 C, rain" and "get_weather" in prompt[1].content


def test_auto_lets_the_model_choose_a_call_or_text(oai):
    first = oai.responses.create(model=MODEL, input="Weather in Oslo?", tools=[WEATHER])  # auto: the default
    assert first.tool_choice == "auto"
    call = first.output[0]
    assert [o.type for o in first.output] == ["function_call"] and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Oslo"}
    prompts = [p for p, _ in ScriptedEngine.calls[-2:]]
    assert "get_weather" in prompts[0][-1].content  # the functions were described to the model
    assert ScriptedEngine.calls[-1][1].guide is not None  # the call it started was regenerated guided
    text = oai.responses.create(model=MODEL, input="Say hi", tools=[WEATHER], tool_choice="auto")
    assert text.output_text == "Hello there, 日本 friend." and [o.type for o in text.output] == ["message"]
    events = list(oai.responses.create(model=MODEL, input="Weather in Oslo?", tools=[WEATHER], stream=True))
    types = [e.type for e in events]
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert set(types[3:-3]) == {"response.function_call_arguments.delta"}
    assert types[-3:] == ["response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"]
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(deltas) == json.loads(events[-3].arguments) == {"city": "Oslo"}
    assert events[-1].response.output[0].call_id == events[2].item.call_id
    with oai.responses.stream(model=MODEL, input="Weather in Oslo?", tools=[WEATHER]) as stream:
        final = stream.get_final_response()
    assert final.output[0].type == "function_call" and json.loads(final.output[0].arguments) == {"city": "Oslo"}
    none = oai.responses.create(model=MODEL, input="Weather in Oslo?", tools=[WEATHER], tool_choice="none")
    assert [o.type for o in none.output] == ["message"] and "get_weather" not in ScriptedEngine.calls[-1][0][-1].content


def test_streamed_function_call_events(oai):
    events = list(oai.responses.create(model=MODEL, input="Weather?", tools=[WEATHER], tool_choice="required",
                                       stream=True))
    types = [e.type for e in events]
    assert types == ["response.created", "response.in_progress", "response.output_item.added",
                     "response.function_call_arguments.delta", "response.function_call_arguments.done",
                     "response.output_item.done", "response.completed"]
    assert json.loads(events[4].arguments) == {"city": "Oslo"} and events[2].item.type == "function_call"
    with oai.responses.stream(model=MODEL, input="Weather?", tools=[WEATHER], tool_choice="required") as stream:
        final = stream.get_final_response()
    assert final.output[0].name == "get_weather"


def test_conversation_items_as_input(oai):
    oai.responses.create(model=MODEL, input=[
        {"role": "developer", "content": "Terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"role": "assistant", "content": "Hello"},
        {"type": "message", "role": "user", "content": "Again"}])
    assert [(m.role, m.content) for m in ScriptedEngine.calls[-1][0]] == [
        ("system", "Terse."), ("user", "Hi"), ("assistant", "Hello"), ("user", "Again")]


def test_retrieve_delete_and_previous_response(oai):
    first = oai.responses.create(model=MODEL, input="Hi")
    assert oai.responses.retrieve(first.id).output_text == first.output_text
    second = oai.responses.create(model=MODEL, input="More", previous_response_id=first.id, instructions="New")
    assert [(m.role, m.content) for m in ScriptedEngine.calls[-1][0]] == [
        ("system", "New"), ("user", "Hi"), ("assistant", first.output_text), ("user", "More")]
    oai.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError) as e:
        oai.responses.retrieve(first.id)
    assert e.value.body["param"] == "response_id"
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(model=MODEL, input="x", previous_response_id=first.id)
    assert e.value.body["param"] == "previous_response_id" and e.value.body["code"] == "previous_response_not_found"
    assert oai.responses.retrieve(second.id).previous_response_id == first.id
    unstored = oai.responses.create(model=MODEL, input="Hi", store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(unstored.id)


def test_store_off_refuses_previous_response_id_saying_why(monkeypatch):
    with _front(monkeypatch, response_store=StoreSettings(mode="off")) as http:
        oai = openai.OpenAI(base_url="http://testserver/v1", api_key="x", http_client=http, max_retries=0)
        r = oai.responses.create(model=MODEL, input="Hi")
        assert r.store is False
        with pytest.raises(openai.BadRequestError) as e:
            oai.responses.create(model=MODEL, input="Hi", previous_response_id=r.id)
        assert e.value.body["param"] == "previous_response_id" and "replicas" in e.value.body["message"]
        with pytest.raises(openai.NotFoundError) as e:
            oai.responses.retrieve(r.id)
        assert "store is off" in e.value.body["message"]


@pytest.mark.parametrize("kwargs,status,param", [
    ({"temperature": 5}, 400, "temperature"),
    ({"max_output_tokens": 0}, 400, "max_output_tokens"),
    ({"tools": [WEATHER], "tool_choice": "auto", "max_output_tokens": 0}, 400, "max_output_tokens"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, 400, "tool_choice"),
    ({"tools": [{"type": "web_search"}], "tool_choice": "required"}, 400, "tools[0].type"),
    ({"text": {"format": {"type": "yaml"}}}, 400, "text.format"),
    ({"text": {"format": {"type": "json_schema", "name": "x"}}}, 400, "text.format.schema"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, 400,
     "input[0].content[0]"),
    ({"input": [{"type": "reasoning", "summary": []}]}, 400, "input[0].type"),
    ({"input": []}, 400, "input"),
    ({"reasoning": {"effort": "high"}}, 400, "reasoning"),
    ({"include": ["message.output_text.logprobs"]}, 400, "include"),
    ({"extra_body": {"frobnicate": 1}}, 400, "frobnicate"),
    ({"model": "gpt-4"}, 404, "model"),
    ({"input": "please fail"}, 400, "input"),  # the engine's error, named in this request's terms
])
def test_errors_name_the_parameter(oai, kwargs, status, param):
    kwargs = {"model": MODEL, "input": "Hi"} | kwargs
    with pytest.raises(openai.APIStatusError) as e:
        oai.responses.create(**kwargs)
    assert e.value.status_code == status
    assert e.value.body["param"] == param, e.value.body
    assert e.value.body["type"] == "invalid_request_error"


def test_store_bounds_by_count_and_age():
    now = [0.0]
    store = ResponseStore(StoreSettings(max_entries=3, ttl_s=10.0), clock=lambda: now[0])
    for i in range(5):
        store.put(f"r{i}", {"id": f"r{i}"}, ({"type": "message"},))
        now[0] += 1.0
    assert len(store) == 3 and store.get("r0") is None and store.get("r1") is None  # the oldest went first
    assert store.get("r4").response == {"id": "r4"}
    now[0] = 12.5  # r2 stored at 2.0, r3 at 3.0, r4 at 4.0: r2 is past its 10 s
    assert store.get("r2") is None and store.get("r3") is not None
    now[0] = 14.0
    assert len(store) == 0
    store.put("a", {}, ())
    assert store.delete("a") and not store.delete("a")
    off = ResponseStore(StoreSettings(mode="off"))
    off.put("a", {}, ())
    assert off.get("a") is None and not off.enabled
    with pytest.raises(ValueError):
        StoreSettings(max_entries=0)
    with pytest.raises(ValueError):
        StoreSettings(mode="redis")


def test_engine_refusals_name_the_responses_parameter():
    from openai_front.responses import engine_error

    e = engine_error(InvalidRequestError("in ensemble 'ensemble', [INVALID_ARG] invalid 'max_tokens': 100000 is too "
                                         "large: the prompt has 31 tokens"))
    assert e.status == 400 and e.param == "max_output_tokens"
    assert engine_error(InvalidRequestError("'text_input' is too long")).param == "input"


@pytest.mark.parametrize("values,mode", [
    ({}, "memory"),  # one replica: its own memory serves every follow-up
    ({"replicaCount": 3}, "off"),
    ({"autoscaling": {"enabled": True}}, "off"),
    ({"replicaCount": 3, "openai": {"responseStore": {"mode": "memory"}}}, "memory"),  # behind session affinity
    ({"openai": {"responseStore": {"mode": "off"}}}, "off"),
])
def test_the_chart_turns_the_store_off_with_several_replicas(values, mode):
    from deploy import chart

    rendered = chart.render(chart.merge_values(chart.load_values([]), values))
    deployment = next(d for r in rendered for d in r.documents if d["kind"] == "Deployment")
    front = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "openai")
    assert f"--response-store={mode}" in front["args"]
    assert "--response-store-max-entries=1024" in front["args"] and "--response-store-ttl=3600" in front["args"]


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Oslo?"}],
                              "tools": [{"type": "function", "function": {k: v for k, v in WEATHER.items()
                                                                          if k != "type"}}]}),
    ("/v1/responses", {"input": "Oslo?", "tools": [WEATHER]}),
    ("/v1/messages", {"max_tokens": 16, "messages": [{"role": "user", "content": "Oslo?"}],
                      "tools": [{"name": "get_weather", "input_schema": WEATHER["parameters"]}]}),
])
@pytest.mark.parametrize("stream", [False, True])
def test_the_tool_plan_is_made_once_a_request(monkeypatch, path, body, stream):
    from openai_front import translate

    made = []
    plan = translate.tool_plan
    monkeypatch.setattr(translate, "tool_plan", lambda *a, **k: made.append(1) or plan(*a, **k))
    with _front(monkeypatch) as http:
        r = http.post(path, json={"model": MODEL, "stream": stream, **body})
    assert r.status_code == 200, r.text
    assert len(made) == 1
