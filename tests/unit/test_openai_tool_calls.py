"""Automatic tool calling (issue 37): formats chosen from the chat template, calls told from
text in whole and streamed answers, deltas as OpenAI streams them; the parameter policy table;
errors in the API's words; chat logprobs without the end-of-turn token."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from client.types import ChatMessage
from contract import tool_formats
from openai_front.errors import ApiError, api_message, validation_error_body
from openai_front.params import CHAT_PARAMETERS, REFUSE
from openai_front.schemas import ChatCompletionRequest
from openai_front.tools import FORMATS, CallStream, assemble, tool_plan
from openai_front.translate import chat_input

ROOT = Path(__file__).resolve().parents[2]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}

LLAMA31 = '{%- if custom_tools %}...{{- "<|python_tag|>" + tool_call.function.name }}{%- endif %}'
LLAMA32 = 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.'
QWEN = '{%- if tools %}<tools>{{ tool | tojson }}</tools> <tool_call>\\n{"name": ...}</tool_call>{%- endif %}'
MISTRAL = '{%- if tools %}[AVAILABLE_TOOLS]{{ tools | tojson }}[/AVAILABLE_TOOLS]{%- endif %}[TOOL_CALLS]'


def chat(**kw):
    return ChatCompletionRequest(**({"model": "m", "messages": [{"role": "user", "content": "hi"}]} | kw))


@pytest.mark.parametrize("template,expected", [
    (LLAMA31, tool_formats.LLAMA3_JSON), (LLAMA32, tool_formats.LLAMA3_JSON), (QWEN, tool_formats.HERMES),
    (MISTRAL, tool_formats.UNSUPPORTED), ("{{ message['content'] }}", tool_formats.JSON), (None, tool_formats.JSON),
])
def test_format_from_the_chat_template(template, expected):
    assert tool_formats.detect(template) == expected


def test_default_models_template_has_no_tool_format(tmp_path):
    """SmolLM2-135M-Instruct's template renders role and content only: the json fallback."""
    (tmp_path / "chat_template.jinja").write_text(
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
        "'<|im_end|>' + '\n'}}{% endfor %}")
    assert tool_formats.recorded_or_detected(tmp_path) == tool_formats.JSON
    (tmp_path / "build.json").write_text(json.dumps({"tool_call_format": "hermes"}))
    assert tool_formats.recorded_or_detected(tmp_path) == tool_formats.HERMES  # the build's record wins
    (tmp_path / "chat_template.jinja").unlink()
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "default", "template": "x"}, {"name": "tool_use", "template": QWEN}]}))
    assert tool_formats.detect(tool_formats.read_chat_template(tmp_path)) == tool_formats.HERMES


def test_auto_describes_the_tools_in_the_families_place():
    messages, sampling = chat_input(chat(tools=[WEATHER]), tool_format=tool_formats.LLAMA3_JSON)
    assert sampling.guide is None and len(messages) == 1
    assert messages[0].role == "user" and messages[0].content.startswith("Given the following functions")
    assert messages[0].content.endswith("hi") and '"get_weather"' in messages[0].content
    messages, _ = chat_input(chat(tools=[WEATHER], messages=[{"role": "system", "content": "Be brief."},
                                                              {"role": "user", "content": "hi"}]),
                             tool_format=tool_formats.HERMES)
    assert messages[0].content.startswith("Be brief.\n\n# Tools") and "<tool_call>" in messages[0].content
    messages, _ = chat_input(chat(tools=[WEATHER], tool_choice="none"), tool_format=tool_formats.HERMES)
    assert [(m.role, m.content) for m in messages] == [("user", "hi")]


def test_earlier_calls_are_written_back_in_the_format():
    history = [{"role": "user", "content": "weather?"},
               {"role": "assistant", "content": None, "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    for fmt, expected in ((tool_formats.LLAMA3_JSON, '{"name": "get_weather", "parameters": {"city": "Oslo"}}'),
                          (tool_formats.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'),
                          (tool_formats.JSON, 'I called get_weather with {"city": "Oslo"}.')):
        messages, _ = chat_input(chat(messages=history, tools=[WEATHER]), tool_format=fmt)
        assert messages[-2:] == [ChatMessage("assistant", expected), ChatMessage("tool", "sunny")]


@pytest.mark.parametrize("fmt", [tool_formats.UNSUPPORTED, tool_formats.NONE])
def test_auto_is_refused_naming_the_model_when_no_format_can_be_used(fmt):
    with pytest.raises(ApiError) as e:
        chat_input(chat(tools=[WEATHER]), tool_format=fmt, model="Mistral-7B")
    assert e.value.param == "tool_choice" and "Mistral-7B" in e.value.message
    assert e.value.code == "unsupported_parameter"
    _, sampling = chat_input(chat(tools=[WEATHER], tool_choice="required"), tool_format=fmt)  # forced still works
    assert sampling.guide is not None


def _run(stream: CallStream, pieces, reason="stop"):
    deltas = [d for p in pieces for d in stream.feed(p)]
    more, finish = stream.finish(reason)
    return deltas + more, finish


@pytest.mark.parametrize("fmt,pieces,content,calls", [
    ("json", ["Hel", "lo there"], "Hello there", []),
    ("json", [" ", "{", '"name": "get_weather", "parameters": {"city": "Oslo"}}'], None, [("get_weather", {"city": "Oslo"})]),
    ("json", ["```json\n[", '{"name": "get_weather", "parameters": {"city": "A"}}, {"name": "get_time", "arguments": {}}]\n```'],
     None, [("get_weather", {"city": "A"}), ("get_time", {})]),
    ("llama3_json", ['<|python_tag|>{"name": "get_time", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "B"}}'],
     None, [("get_time", {}), ("get_weather", {"city": "B"})]),
    ("hermes", ["<tool_", 'call>\n{"name": "get_weather", "arguments": {"city": "C"}}\n</tool_call>\n<tool_call>\n'
                '{"name": "get_time", "arguments": {}}\n</tool_call>'], None, [("get_weather", {"city": "C"}), ("get_time", {})]),
    ("hermes", ["Sure: ", "<tool_call>"], "Sure: <tool_call>", []),  # a call only at the start
    ("json", ['{"name": "unknown_tool", "parameters": {}}'], '{"name": "unknown_tool", "parameters": {}}', []),
    ("json", ['{"not": "a call"}'], '{"not": "a call"}', []),
])
def test_auto_tells_calls_from_text(fmt, pieces, content, calls):
    plan = tool_plan([WEATHER, TIME], None, tool_format=fmt)
    stream = CallStream(plan, "auto")
    deltas, finish = _run(stream, pieces)
    message = assemble(deltas)
    assert message["content"] == content
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message.get("tool_calls", [])]
    assert got == calls and finish == ("tool_calls" if calls else "stop")
    assert stream.started_call == (content is None or content.startswith("{"))


def test_streamed_call_deltas_come_as_openai_sends_them():
    """First the call's index, id, type and name with empty arguments, then argument fragments
    as they are generated; the fragments join to the arguments."""
    plan = tool_plan([WEATHER, TIME], "required")
    pieces = ['{"', 'name": "get_weather"', ', "arguments": ', '{"city', '": "Os', 'lo"}', "\n", "}"]
    deltas, finish = _run(CallStream(plan, "object"), pieces)
    first = deltas[0]["tool_calls"][0]
    assert first["id"].startswith("call_") and first["type"] == "function"
    assert first["function"] == {"name": "get_weather", "arguments": ""} and first["index"] == 0
    fragments = [d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:]]
    assert len(fragments) >= 3 and all("id" not in d["tool_calls"][0] for d in deltas[1:])
    assert "".join(fragments) == '{"city": "Oslo"}' and finish == "tool_calls"


def test_a_forced_call_cut_by_max_tokens():
    """Named: tool_calls with the arguments so far (not valid JSON) and finish_reason length;
    required, cut before the name is whole: the text as content, finish_reason length."""
    named = tool_plan([WEATHER], {"type": "function", "function": {"name": "get_weather"}})
    deltas, finish = _run(CallStream(named, "arguments"), ['{"ci', 'ty": "Os'], "length")
    message = assemble(deltas)
    assert finish == "length" and message["content"] is None
    assert message["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Os'}
    required = tool_plan([WEATHER], "required")
    deltas, finish = _run(CallStream(required, "object"), ['{"name": "get_wea'], "length")
    assert finish == "length" and assemble(deltas) == {"role": "assistant", "content": '{"name": "get_wea'}
    deltas, finish = _run(CallStream(required, "object"), ['{"name": "get_weather", "arguments": {"city": "Os'], "length")
    assert finish == "length" and assemble(deltas)["tool_calls"][0]["function"]["arguments"] == '{"city": "Os'


def test_parallel_tool_calls_false_keeps_one_call():
    plan = tool_plan([WEATHER, TIME], "auto", tool_format="json", parallel_tool_calls=False)
    deltas, _ = _run(CallStream(plan, "auto"), ['[{"name": "get_time", "parameters": {}}, {"name": "get_time", "parameters": {}}]'])
    assert len(assemble(deltas)["tool_calls"]) == 1
    assert "array" not in plan.regeneration_guide(several=True).guide


def test_the_policy_table_covers_every_sdk_parameter():
    from openai.resources.chat.completions import Completions

    sdk = set(inspect.signature(Completions.create).parameters) - {"self", "extra_headers", "extra_query",
                                                                   "extra_body", "timeout"}
    assert sdk == set(CHAT_PARAMETERS), "decide each new SDK parameter in openai_front/params.py"
    assert set(CHAT_PARAMETERS) <= set(ChatCompletionRequest.model_fields)


@pytest.mark.parametrize("name", [n for n, p in CHAT_PARAMETERS.items() if p.action == REFUSE])
def test_refused_parameters_say_so(name):
    value = {"modalities": ["text", "audio"], "functions": [{"name": "f"}], "logit_bias": {"1": 2.0},
             "function_call": "auto"}.get(name, {"x": 1})
    with pytest.raises(ApiError) as e:
        chat_input(chat(**{name: value}))
    assert (e.value.param, e.value.code) == (name, "unsupported_parameter")


def test_ignored_and_default_valued_parameters_are_accepted():
    chat_input(chat(store=True, metadata={"a": "b"}, reasoning_effort="low", service_tier="auto", user="u",
                    prediction={"type": "content", "content": "x"}, safety_identifier="s", prompt_cache_key="k",
                    verbosity="low", modalities=["text"], audio=None, web_search_options=None, logit_bias={},
                    parallel_tool_calls=True, prompt_cache_retention="24h", prompt_cache_options={}))


def test_server_refusals_name_the_parameter_in_the_apis_words():
    message, param = api_message("in ensemble 'ensemble', [INVALID_ARG] invalid 'max_tokens': 10000000 is too "
                                 "large", chat=True)
    assert (message, param) == ("Invalid 'max_tokens': 10000000 is too large", "max_tokens")
    message, param = api_message("[INVALID_ARG] invalid 'text_input': the prompt has 9000 tokens", chat=False)
    assert (message, param) == ("Invalid 'prompt': the prompt has 9000 tokens", "prompt")
    assert api_message("invalid 'stop_words': at most 64", chat=True)[1] == "stop"


def test_schema_errors_name_the_parameter():
    assert validation_error_body({"loc": ("body", 1), "type": "json_invalid", "msg": "JSON decode error"}).param is None
    e = validation_error_body({"loc": ("body", "messages", 0, "role"), "type": "literal_error", "msg": "bad"})
    assert e.param == "messages[0].role"
    e = validation_error_body({"loc": ("body", "frobnicate"), "type": "extra_forbidden", "msg": "x"})
    assert e.param == "frobnicate" and "frobnicate" in e.message
    assert validation_error_body({"loc": ("body", "model"), "type": "missing", "msg": "x"}).param == "model"


def test_chat_logprobs_leave_out_the_end_of_turn_token():
    from openai_front.logprobs import TokenTexts
    from tokenizers import Tokenizer

    engine = next((p for p in (ROOT / "build" / "engines").glob("SmolLM2-135M-Instruct-openvino-*") if p.is_dir()), None)
    if engine is None or not (engine / "tokenizer.json").is_file():
        pytest.skip("no default engine built")
    texts = TokenTexts(engine)
    tokenizer = Tokenizer.from_file(str(engine / "tokenizer.json"))
    ids = tokenizer.encode("Hello there?", add_special_tokens=False).ids + [tokenizer.token_to_id("<|im_end|>")]
    entries = texts.chat_content(ids, [-0.1] * len(ids))
    assert "".join(e["token"] for e in entries) == "Hello there?"
