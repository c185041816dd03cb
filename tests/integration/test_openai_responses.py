"""/v1/responses on a live front and Triton server, called with the official `openai` SDK."""

from __future__ import annotations

import json
import socket
import time

import openai
import pytest
from pydantic import BaseModel

from tests.integration.openai_front_process import MODEL, running_front

pytestmark = pytest.mark.server
KEY = "test-key-123"
WEATHER = {"type": "function", "name": "get_weather", "description": "Current weather of a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}}


@pytest.fixture(scope="module")
def front(server, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("front") / "key"
    key_file.write_text(KEY)
    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp("front-log"), "--api-key-file", str(key_file),
                       "--response-store-max-entries", "64", "--response-store-ttl", "600") as base:
        yield base


@pytest.fixture
def oai(front):
    return openai.OpenAI(base_url=front + "/v1", api_key=KEY, max_retries=0)


def test_text_and_usage(oai):
    r = oai.responses.create(model=MODEL, input="What is the capital of France?", max_output_tokens=16,
                             temperature=0)
    assert r.status == "completed" and "Paris" in r.output_text
    assert r.usage.input_tokens > 10 and 0 < r.usage.output_tokens <= 16
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    cut = oai.responses.create(model=MODEL, input="Tell me a long story.", max_output_tokens=8, temperature=0)
    assert cut.status == "incomplete" and cut.incomplete_details.reason == "max_output_tokens"
    assert cut.usage.output_tokens == 8


def test_streamed_text_equals_whole_text(oai):
    kw = dict(model=MODEL, instructions="You are concise.", input="Name three fruits in Japanese (日本語).",
              max_output_tokens=40, temperature=0)
    whole = oai.responses.create(**kw)
    events = list(oai.responses.create(stream=True, **kw))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          f"response.{whole.status}"]  # completed, or incomplete at max_output_tokens
    assert set(types[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text
    assert events[-1].response.output_text == whole.output_text
    assert events[-1].response.usage.output_tokens == whole.usage.output_tokens
    kw = dict(model=MODEL, input="What is the capital of France?", max_output_tokens=64, temperature=0)
    whole = oai.responses.create(**kw)
    with oai.responses.stream(**kw) as stream:  # the SDK's helper: its final response needs response.completed
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert whole.status == "completed" and final.output_text == "".join(deltas) == whole.output_text


class Capital(BaseModel):
    country: str
    capital: str


def test_structured_output(oai):
    r = oai.responses.parse(model=MODEL, input="France's capital, as JSON.", text_format=Capital,
                            max_output_tokens=64, temperature=0)
    assert isinstance(r.output_parsed, Capital)
    r = oai.responses.create(model=MODEL, input="A JSON object about Paris.", text={"format": {"type": "json_object"}},
                             max_output_tokens=64, temperature=0)
    if r.status == "completed":
        assert isinstance(json.loads(r.output_text), dict)


def test_function_tool_round_trip_with_previous_response_id(oai):
    first = oai.responses.create(model=MODEL, input="What is the weather in Oslo?", tools=[WEATHER],
                                 tool_choice={"type": "function", "name": "get_weather"}, max_output_tokens=32,
                                 temperature=0)
    call = first.output[0]
    assert call.type == "function_call" and call.name == "get_weather"
    assert set(json.loads(call.arguments)) == {"city"}
    result = [{"type": "function_call_output", "call_id": call.call_id,
               "output": json.dumps({"temperature_c": 12, "sky": "rain"})}]
    second = oai.responses.create(model=MODEL, previous_response_id=first.id, tools=[WEATHER], tool_choice="none",
                                  input=result, max_output_tokens=32, temperature=0)
    assert second.output[0].type == "message" and second.output_text
    assert second.previous_response_id == first.id
    alone = oai.responses.create(model=MODEL, input=result, max_output_tokens=1, temperature=0)
    assert second.usage.input_tokens > alone.usage.input_tokens + 10  # the first turn and the call went in
    streamed = list(oai.responses.create(model=MODEL, input="Weather in Rome?", tools=[WEATHER],
                                         tool_choice="required", max_output_tokens=32, temperature=0, stream=True))
    types = [e.type for e in streamed]
    assert "response.function_call_arguments.done" in types and types[-1] == "response.completed"
    assert streamed[-1].response.output[0].name == "get_weather"


def test_auto_tool_call_whole_streamed_and_answered(oai):
    """tool_choice auto (the default with tools), as on the chat route: the model chooses the
    call; streamed, its arguments arrive in function_call_arguments.delta events."""
    kw = dict(model=MODEL, input="What is the weather in Paris?", tools=[WEATHER], max_output_tokens=60,
              temperature=0)
    whole = oai.responses.create(**kw)
    assert whole.tool_choice == "auto" and [o.type for o in whole.output] == ["function_call"]
    call = whole.output[0]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    events = list(oai.responses.create(stream=True, **kw))
    types = [e.type for e in events]
    assert types[2] == "response.output_item.added" and events[2].item.type == "function_call"
    assert types.count("response.function_call_arguments.delta") >= 2  # streamed as generated
    assert types[-3:] == ["response.function_call_arguments.done", "response.output_item.done",
                          "response.completed"]
    assert "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta") == call.arguments
    answer = oai.responses.create(model=MODEL, previous_response_id=whole.id, tools=[WEATHER], max_output_tokens=60,
                                  temperature=0, input=[{"type": "function_call_output", "call_id": call.call_id,
                                                         "output": json.dumps({"city": "Paris", "temperature_c": 18,
                                                                               "sky": "sunny"})}])
    assert [o.type for o in answer.output] == ["message"] and answer.output_text


def test_retrieve_and_delete(oai):
    r = oai.responses.create(model=MODEL, input="Say hi.", max_output_tokens=8, temperature=0, metadata={"t": "1"})
    got = oai.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.metadata == {"t": "1"}
    oai.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.delete(r.id)


@pytest.mark.parametrize("kwargs,param", [
    ({"temperature": 5}, "temperature"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format"),
    ({"previous_response_id": "resp_nope"}, "previous_response_id"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0]"),
    ({"max_output_tokens": 100_000}, "max_output_tokens"),
])
def test_errors_name_the_parameter(oai, kwargs, param):
    with pytest.raises(openai.BadRequestError) as e:
        oai.responses.create(**({"model": MODEL, "input": "hi"} | kwargs))
    assert e.value.body["param"] == param, e.value.body


def test_store_off_refuses_previous_response_id(server, tmp_path_factory):
    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp("front-off"),
                       "--response-store", "off") as base:
        oai = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
        r = oai.responses.create(model=MODEL, input="Hi", max_output_tokens=4)
        assert r.store is False
        with pytest.raises(openai.BadRequestError) as e:
            oai.responses.create(model=MODEL, input="And?", previous_response_id=r.id)
        assert e.value.body["param"] == "previous_response_id" and "replicas" in e.value.body["message"]


def test_client_closing_the_stream_cancels_the_request(front, metrics):
    import http.client

    from contract import metrics as m
    from serving.prometheus import value

    host, port = front.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = json.dumps({"model": MODEL, "input": "Write a long story.", "max_output_tokens": 400, "stream": True})
    conn.request("POST", "/v1/responses", body=body,
                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    deltas = 0
    while deltas < 3:
        line = response.readline()
        deltas += line.startswith(b"event: response.output_text.delta")
    deadline = time.monotonic() + 2
    while value(metrics(), m.REQUESTS_RUNNING.name) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    conn.sock.shutdown(socket.SHUT_RDWR)  # the client vanishes mid-answer
    response.close()
    conn.close()
    deadline = time.monotonic() + 5
    while value(metrics(), m.REQUESTS_RUNNING.name) != 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert value(metrics(), m.REQUESTS_RUNNING.name) == 0
