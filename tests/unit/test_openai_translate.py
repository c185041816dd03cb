import json

import pytest

from client.types import GenerationResult, StreamChunk
from openai_front.errors import ApiError, param_of
from openai_front.schemas import ChatCompletionRequest, CompletionRequest
from openai_front.tools import CallStream, assemble, tool_plan
from openai_front.translate import ResponseShaper, chat_input, completion_input


def chat(**kw):
    return ChatCompletionRequest(**({"model": "m", "messages": [{"role": "user", "content": "hi"}]} | kw))


def test_chat_mapping():
    messages, sampling = chat(messages=[{"role": "developer", "content": "be brief"},
                                        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
                              max_completion_tokens=9, stop="END", temperature=0.5, seed=3).model_copy(), None
    messages, sampling = chat_input(messages)
    assert [(m.role, m.content) for m in messages] == [("system", "be brief"), ("user", "ab")]
    assert (sampling.max_tokens, sampling.stop, sampling.temperature, sampling.seed) == (9, ("END",), 0.5, 3)


def test_completion_mapping_and_ignore_eos():
    prompt, sampling = completion_input(CompletionRequest(model="m", prompt=["x"], max_tokens=7, ignore_eos=True, echo=True))
    assert prompt == "x" and sampling.min_tokens == 7 and sampling.echo


@pytest.mark.parametrize("request_,param", [
    (chat(n=17), "n"),
    (chat(n=0), "n"),
    (chat(tools=[{"type": "function"}]), "tools"),
    (chat(response_format={"type": "xml"}), "response_format"),
    (chat(top_logprobs=0), "top_logprobs"),
    (chat(logprobs=True, top_logprobs=21), "top_logprobs"),
    (chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]), "messages[0].content"),
])
def test_unsupported_chat_parameters(request_, param):
    with pytest.raises(ApiError) as e:
        chat_input(request_)
    assert e.value.status == 400 and e.value.param == param


def test_batched_prompts_are_refused():
    with pytest.raises(ApiError, match="one prompt per request"):
        completion_input(CompletionRequest(model="m", prompt=["a", "b"]))


def test_error_param_names_map_to_openai_names():
    assert param_of("invalid 'stop_words': at most 64", chat=True) == "stop"
    assert param_of("invalid 'text_input': the prompt is empty", chat=False) == "prompt"
    assert param_of("invalid 'messages': ...", chat=True) == "messages"
    assert param_of("invalid 'max_tokens': 5 is too large", chat=True) == "max_tokens"


def test_shapes():
    shaper = ResponseShaper("m", chat=True)
    whole = shaper.whole([GenerationResult("hello", "length", 5, 3, 0.1, 0.2)])
    assert whole["object"] == "chat.completion" and whole["choices"][0]["message"]["content"] == "hello"
    assert whole["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    first = shaper.first_chunks(1)[0]
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    chunk = shaper.chunk(StreamChunk("he", "", 5, 1), None)
    assert chunk["id"] == first["id"] == whole["id"] and chunk["choices"][0]["delta"] == {"content": "he"}
    text = ResponseShaper("m", chat=False).chunk(StreamChunk("x", "stop", 1, 1), "stop")
    assert text["object"] == "text_completion" and text["choices"][0]["finish_reason"] == "stop"


def test_features_map_to_typed_sampling():
    _, sampling = chat_input(chat(n=3, logprobs=True, top_logprobs=0, seed=4, response_format={
        "type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object"}, "strict": True}}))
    assert (sampling.n, sampling.return_log_probs, sampling.seed, sampling.temperature) == (3, True, 4, 1.0)
    assert sampling.guide.type == "json_schema" and json.loads(sampling.guide.guide) == {"type": "object"}
    _, sampling = chat_input(chat(response_format={"type": "json_object"}))
    assert json.loads(sampling.guide.guide) == {"type": "object"} and sampling.n == 1 and sampling.temperature is None
    _, sampling = completion_input(CompletionRequest(model="m", prompt="x", logprobs=0, guided_regex="[ab]+"))
    assert sampling.return_log_probs and (sampling.guide.type, sampling.guide.guide) == ("regex", "[ab]+")
    _, sampling = chat_input(chat(logprobs=True, top_logprobs=20))
    assert (sampling.return_log_probs, sampling.top_logprobs) == (True, 20)
    _, sampling = completion_input(CompletionRequest(model="m", prompt="x", logprobs=5))
    assert (sampling.return_log_probs, sampling.top_logprobs) == (True, 5)
    with pytest.raises(ApiError, match="logprobs"):  # OpenAI's bound on the completions endpoint
        completion_input(CompletionRequest(model="m", prompt="x", logprobs=6))
    # lm-eval's loglikelihood requests: the prompt's log probs, 1 alternative each (tests/unit/test_prompt_logprobs.py)
    _, sampling = completion_input(CompletionRequest(model="m", prompt="x", logprobs=1, echo=True, max_tokens=1))
    assert (sampling.prompt_logprobs, sampling.top_logprobs, sampling.echo) == (1, 1, True)


def test_top_logprobs_shape_as_openai(tmp_path):
    """Chat: each content entry's top_logprobs lists {token, logprob, bytes} most likely first;
    completions: {text: log prob} with the chosen token added when it is not among them."""
    from openai_front.logprobs import TokenTexts
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    tok = Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "\u0120c": 2}, merges=[]))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    tok.save(str(tmp_path / "tokenizer.json"))
    texts = TokenTexts(tmp_path)
    tops = (((1, -0.1), (0, -2.5)),)
    chat_body = ResponseShaper("m", chat=True, token_texts=texts).whole(
        [GenerationResult("a", "stop", 1, 1, None, 0.1, token_ids=[0], log_probs=[-2.5], top_logprobs=list(tops))])
    entry = chat_body["choices"][0]["logprobs"]["content"][0]
    assert entry["token"] == "a" and entry["top_logprobs"] == [
        {"token": "b", "logprob": -0.1, "bytes": [98]}, {"token": "a", "logprob": -2.5, "bytes": [97]}]
    legacy = texts.completion([2], [-3.0], tops=tops)
    assert legacy["tokens"] == [" c"] and legacy["top_logprobs"] == [{"b": -0.1, "a": -2.5, " c": -3.0}]
    assert texts.completion([2], [-3.0])["top_logprobs"] is None


def test_n_choices_and_summed_usage():
    shaper = ResponseShaper("m", chat=False)
    whole = shaper.whole([GenerationResult("a", "stop", 4, 2, None, 0.1), GenerationResult("b", "length", 4, 5, None, 0.1)])
    assert [(c["index"], c["text"], c["finish_reason"]) for c in whole["choices"]] == [(0, "a", "stop"), (1, "b", "length")]
    assert whole["usage"] == {"prompt_tokens": 4, "completion_tokens": 7, "total_tokens": 11}
    assert shaper.chunk(StreamChunk("x", "", 4, 1, sequence_index=1), None)["choices"][0]["index"] == 1


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}


def test_tools_become_guided_json_and_tool_calls():
    messages, sampling = chat_input(chat(tools=[WEATHER, TIME], tool_choice={"type": "function",
                                                                             "function": {"name": "get_time"}}))
    assert json.loads(sampling.guide.guide) == TIME["function"]["parameters"]
    assert messages[0].role == "system" and "get_time" in messages[0].content
    _, sampling = chat_input(chat(tools=[WEATHER, TIME], tool_choice="required"))
    assert [b["properties"]["name"]["const"] for b in json.loads(sampling.guide.guide)["anyOf"]] == ["get_weather",
                                                                                                    "get_time"]
    stream = CallStream(tool_plan([WEATHER, TIME], "required"), "object")
    deltas = [d for piece in ('{"name": "get_weather", ', '"arguments": {"city": ', '"Oslo"}', "}") for d in stream.feed(piece)]
    more, finish = stream.finish("stop")
    message = assemble(deltas + more)
    assert finish == "tool_calls" and message["content"] is None
    call = message["tool_calls"][0]
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Oslo"}
    _, sampling = chat_input(chat(tools=[WEATHER], tool_choice="none"))
    assert sampling.guide is None


@pytest.mark.parametrize("kwargs,param", [
    ({"tools": [WEATHER], "tool_choice": "auto", "n": 2}, "n"),
    ({"tools": [WEATHER], "logprobs": True}, "logprobs"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "required", "response_format": {"type": "json_object"}}, "response_format"),
])
def test_tool_requests_we_cannot_honour(kwargs, param):
    with pytest.raises(ApiError) as e:
        chat_input(chat(**kwargs))
    assert e.value.status == 400 and e.value.param == param


def test_priority_from_the_body_or_the_header():
    from openai_front.translate import with_priority_header

    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], priority=0.9)
    _, sampling = chat_input(req)
    assert sampling.priority == 0.9
    assert with_priority_header(sampling, "0.1").priority == 0.9  # the body wins
    _, plain = completion_input(CompletionRequest(model="m", prompt="hi"))
    assert plain.priority is None and with_priority_header(plain, None).priority is None
    assert with_priority_header(plain, "0.25").priority == 0.25
    for bad in ("high", "1.5", "nan"):
        with pytest.raises(ApiError) as e:
            with_priority_header(plain, bad)
        assert e.value.status == 400 and e.value.param == "priority"
    with pytest.raises(ValueError):
        CompletionRequest(model="m", prompt="hi", priority=2.0)


def test_every_body_carries_the_deployments_system_fingerprint():
    from openai_front.translate import ResponseShaper

    shaper = ResponseShaper("m", chat=True, system_fingerprint="fp_0123456789")
    assert shaper.envelope("chat.completion.chunk", [])["system_fingerprint"] == "fp_0123456789"
    assert ResponseShaper("m", chat=False).envelope("text_completion", [])["system_fingerprint"] is None


def test_guided_choice_and_structured_outputs_become_one_guide():
    _, sampling = chat_input(chat(guided_choice=["yes", 'say "no"']))
    assert (sampling.guide.type, sampling.guide.guide) == ("ebnf_grammar", 'root ::= "yes" | "say \\"no\\""')
    _, structured = chat_input(chat(structured_outputs={"choice": ["yes", 'say "no"']}))
    assert structured.guide == sampling.guide
    _, sampling = completion_input(CompletionRequest(model="m", prompt="x", structured_outputs={"regex": "[ab]+"}))
    assert (sampling.guide.type, sampling.guide.guide) == ("regex", "[ab]+")
    _, sampling = chat_input(chat(structured_outputs={"json": {"type": "object", "required": ["a"]}}))
    assert sampling.guide.type == "json_schema" and json.loads(sampling.guide.guide)["required"] == ["a"]
    _, sampling = chat_input(chat(structured_outputs={"json_object": True}))
    assert json.loads(sampling.guide.guide) == {"type": "object"}
    _, sampling = chat_input(chat(structured_outputs={"grammar": 'root ::= "a"'}))
    assert sampling.guide.type == "ebnf_grammar"


@pytest.mark.parametrize("fields,param", [
    ({"guided_choice": []}, "guided_choice"),
    ({"guided_choice": ["a", ""]}, "guided_choice"),
    ({"structured_outputs": {"choice": "a"}}, "structured_outputs.choice"),
    ({"structured_outputs": {"structural_tag": "{}"}}, "structured_outputs.structural_tag"),
    ({"structured_outputs": {"regex": "a", "disable_any_whitespace": True}}, "structured_outputs.disable_any_whitespace"),
    ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs.choice"),
    ({"guided_regex": "a", "structured_outputs": {"json_object": True}}, "structured_outputs.json_object"),
])
def test_bad_structured_outputs_are_refused_naming_the_field(fields, param):
    with pytest.raises(ApiError) as e:
        chat_input(chat(**fields))
    assert e.value.param == param
