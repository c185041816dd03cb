"""The OpenAI front as agent frameworks use it (issue 37), through the official `openai` package
against a live front on the default model: automatic tool calling (whole, streamed, a full
round trip), forced calls cut by max_tokens, chat logprobs that join to the content, errors
that name the parameter, and the SDK's parameters honoured, ignored or refused."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from tests.integration.openai_front_process import MODEL, running_front

pytestmark = pytest.mark.server

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture(scope="module")
def front(agent_front):
    return agent_front


@pytest.fixture
def oai(front):
    return openai.OpenAI(base_url=front + "/v1", api_key="none", max_retries=0)


def streamed(stream):
    """(content, {index: {id, name, arguments}}, finish_reason, the tool-call deltas in order)."""
    content, calls, finish, deltas = "", {}, None, []
    for chunk in stream:
        for c in chunk.choices:
            finish = c.finish_reason or finish
            content += c.delta.content or ""
            for call in c.delta.tool_calls or []:
                deltas.append(call)
                entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                entry["id"] = entry["id"] or call.id
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
    return content, calls, finish, deltas


@pytest.mark.parametrize("tool_choice", [openai.NOT_GIVEN, "auto"], ids=["absent", "auto"])
def test_auto_tool_call_whole_and_streamed(oai, tool_choice):
    kwargs = dict(model=MODEL, messages=ASK, tools=[WEATHER], tool_choice=tool_choice, max_tokens=60, temperature=0)
    whole = oai.chat.completions.create(**kwargs).choices[0]
    assert whole.finish_reason == "tool_calls" and whole.message.content is None
    [call] = whole.message.tool_calls
    assert call.id.startswith("call_") and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    content, calls, finish, deltas = streamed(oai.chat.completions.create(**kwargs, stream=True))
    assert content == "" and finish == "tool_calls" and list(calls) == [0]
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["arguments"]) == {"city": "Paris"}
    assert calls[0]["arguments"] == call.function.arguments
    # As OpenAI streams a call: id, type and name first (empty arguments), then argument fragments.
    assert deltas[0].id and deltas[0].type == "function" and deltas[0].function.arguments == ""
    assert len(deltas) >= 3 and all(d.id is None and d.function.name is None for d in deltas[1:])


def test_auto_answers_in_text_when_no_tool_fits(oai):
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": "Say hi"}], tools=[WEATHER], max_tokens=40,
                  temperature=0)
    whole = oai.chat.completions.create(**kwargs).choices[0]
    assert whole.finish_reason == "stop" and whole.message.tool_calls is None and whole.message.content
    content, calls, finish, _ = streamed(oai.chat.completions.create(**kwargs, stream=True))
    assert (content, calls, finish) == (whole.message.content, {}, "stop")


def test_auto_round_trip(oai):
    """The agent loop: request -> tool_calls -> the tool's result -> the answer."""
    messages = list(ASK)
    first = oai.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER], max_tokens=60, temperature=0)
    call = first.choices[0].message.tool_calls[0]
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id,
                     "content": json.dumps({"city": "Paris", "temperature_c": 18, "sky": "sunny"})})
    answer = oai.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER], max_tokens=60, temperature=0)
    choice = answer.choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert "sunny" in choice.message.content.lower()


def test_tool_choice_none_answers_in_text(oai):
    r = oai.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER], tool_choice="none", max_tokens=30,
                                    temperature=0)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_forced_call_cut_by_max_tokens(oai, stream):
    """A named call cut by max_tokens: tool_calls with the arguments generated so far (not
    valid JSON) and finish_reason "length" (docs/openai-api.md)."""
    kwargs = dict(model=MODEL, messages=ASK, tools=[WEATHER], max_tokens=3, temperature=0,
                  tool_choice={"type": "function", "function": {"name": "get_weather"}})
    if stream:
        content, calls, finish, _ = streamed(oai.chat.completions.create(**kwargs, stream=True))
        name, arguments = calls[0]["name"], calls[0]["arguments"]
    else:
        choice = oai.chat.completions.create(**kwargs).choices[0]
        finish, name, arguments = choice.finish_reason, *(lambda f: (f.name, f.arguments))(choice.message.tool_calls[0].function)
    assert finish == "length" and name == "get_weather" and arguments
    with pytest.raises(ValueError):
        json.loads(arguments)


def test_auto_refused_naming_the_model_when_no_format_can_be_used(server, tmp_path_factory):
    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp("front-none"),
                       "--tool-call-format", "none") as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model=MODEL, messages=ASK, tools=[WEATHER])
        assert e.value.body["param"] == "tool_choice" and MODEL in e.value.body["message"]
        assert e.value.body["code"] == "unsupported_parameter"


def test_chat_logprobs_join_to_the_content(oai):
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": "Say hi"}], max_tokens=40, temperature=0,
                  logprobs=True)
    whole = oai.chat.completions.create(**kwargs).choices[0]
    assert whole.finish_reason == "stop"
    assert "".join(e.token for e in whole.logprobs.content) == whole.message.content
    chunks = list(oai.chat.completions.create(**kwargs, stream=True))
    tokens = [e.token for ch in chunks for c in ch.choices if c.logprobs for e in c.logprobs.content or []]
    assert "".join(tokens) == whole.message.content


def test_errors_name_the_parameter_in_the_apis_words(oai, front):
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL, messages=ASK, max_tokens=10_000_000)
    body = e.value.body
    assert body["param"] == "max_tokens" and body["message"].startswith("Invalid 'max_tokens'")
    assert "ensemble" not in body["message"] and "INVALID_ARG" not in body["message"]
    request = urllib.request.Request(front + "/v1/chat/completions", data=b'{"model": "x", "messages": [',
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(request, timeout=30)
    error = json.loads(raw.value.read())["error"]
    assert raw.value.code == 400 and error["param"] is None and "not valid JSON" in error["message"]
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL, messages=[{"role": "robot", "content": "x"}])
    assert e.value.body["param"] == "messages[0].role"


def test_sdk_parameters_accepted_and_ignored(oai):
    r = oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hi"}], max_completion_tokens=8, store=True,
        metadata={"run": "1"}, reasoning_effort="low", service_tier="auto", user="u-1", safety_identifier="s-1",
        prompt_cache_key="k", verbosity="low", modalities=["text"], parallel_tool_calls=True,
        prediction={"type": "content", "content": "Hello"})
    assert r.choices[0].message.content


@pytest.mark.parametrize("kwargs,param", [
    ({"web_search_options": {}}, None),  # {} asks for nothing: accepted
    ({"web_search_options": {"search_context_size": "low"}}, "web_search_options"),
    ({"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}, "modalities"),
    ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ({"logit_bias": {"1": 5}}, "logit_bias"),
])
def test_sdk_parameters_refused(oai, kwargs, param):
    call = lambda: oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],  # noqa: E731
                                               max_tokens=4, **kwargs)
    if param is None:
        call()
        return
    with pytest.raises(openai.BadRequestError) as e:
        call()
    assert (e.value.body["param"], e.value.body["code"]) == (param, "unsupported_parameter")
