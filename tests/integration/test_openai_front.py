"""The OpenAI-compatible front, called with the official `openai` package."""

from __future__ import annotations

import asyncio
import json
import time

import openai
import pytest

from tests.integration.openai_front_process import MODEL, running_front


pytestmark = pytest.mark.server
KEY = "test-key-123"


@pytest.fixture(scope="module")
def front(server, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("front") / "key"
    key_file.write_text(KEY)
    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp("front-log"), "--api-key-file", str(key_file)) as base:
        yield base


@pytest.fixture
def oai(front):
    return openai.OpenAI(base_url=front + "/v1", api_key=KEY, max_retries=0)


def test_models(oai):
    assert [m.id for m in oai.models.list().data] == [MODEL]


def test_chat_completion(oai):
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "What is the capital of France?"}],
                                    max_tokens=16, temperature=0)
    assert "Paris" in r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens > 10 and 0 < r.usage.completion_tokens <= 16
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_streamed_chat_equals_whole(oai):
    messages = [{"role": "system", "content": "You are concise."}, {"role": "user", "content": "Name three fruits in Japanese (日本語)."}]
    whole = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=40, temperature=0)
    chunks = list(oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=40, temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    # every body names what the deployment computes with: preprocessing's system_fingerprint
    fingerprints = {whole.system_fingerprint} | {c.system_fingerprint for c in chunks}
    assert len(fingerprints) == 1 and whole.system_fingerprint.startswith("fp_")


def test_completion_and_stop(oai):
    r = oai.completions.create(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=20, temperature=0, stop=[" 7"])
    assert " 7" not in r.choices[0].text
    streamed = "".join(c.choices[0].text for c in oai.completions.create(
        model=MODEL, prompt="1, 2, 3, 4,", max_tokens=20, temperature=0, stop=[" 7"], stream=True))
    assert streamed == r.choices[0].text


def test_length_finish_and_seed(oai):
    kw = dict(model=MODEL, messages=[{"role": "user", "content": "Tell me a story."}], max_tokens=8, temperature=1.0, seed=42)
    a, b = oai.chat.completions.create(**kw), oai.chat.completions.create(**kw)
    assert a.choices[0].finish_reason == "length" and a.usage.completion_tokens == 8
    assert a.choices[0].message.content == b.choices[0].message.content  # same seed, same text


@pytest.mark.parametrize("kwargs,param", [
    ({"n": 17}, "n"),
    ({"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], "n": 2}, "n"),  # auto: n=1
    ({"max_tokens": 10_000_000}, "max_tokens"),
    ({"temperature": 5}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"max_tokens": 100_000}, "max_tokens"),
    ({"extra_body": {"frobnicate": 1}}, "frobnicate"),
])
def test_unsupported_or_invalid_parameters_get_openai_errors(oai, kwargs, param):
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], **kwargs)
    assert e.value.status_code == 400
    assert e.value.body["param"] == param


def test_api_key_is_required(front):
    bad = openai.OpenAI(base_url=front + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_unknown_model_is_404(oai):
    with pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hi"}])


def test_oversized_body_is_refused_before_it_is_read(front):
    import http.client

    host, port = front.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/v1/completions")
    for name, value in {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json",
                        "Content-Length": str(2 << 20)}.items():
        conn.putheader(name, value)
    conn.endheaders()  # announce 2 MiB, send none of it
    response = conn.getresponse()
    assert response.status == 413
    assert "request body over" in json.loads(response.read())["error"]["message"]


def test_sixteen_concurrent_sse_streams(front):
    client = openai.AsyncOpenAI(base_url=front + "/v1", api_key=KEY, max_retries=0)

    async def one(i):
        stream = await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": f"Write a sentence about the number {i}."}],
            max_tokens=24, stream=True, extra_body={"min_tokens": 24}, stream_options={"include_usage": True})
        parts, usage = [], None
        async for chunk in stream:
            if chunk.choices:
                parts.append(chunk.choices[0].delta.content or "")
            if chunk.usage:
                usage = chunk.usage
        return "".join(parts), usage

    async def main():
        try:
            return await asyncio.gather(*(one(i) for i in range(16)))
        finally:
            await client.close()

    results = asyncio.run(main())
    assert len(results) == 16
    for text, usage in results:
        assert text and usage.completion_tokens == 24


def test_client_disconnect_mid_sse_frees_the_engine(front, metrics):
    import http.client
    import socket

    from serving.prometheus import value
    from contract import metrics as m

    host, port = front.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Write a long story."}],
                       "max_tokens": 400, "min_tokens": 400, "stream": True})
    conn.request("POST", "/v1/chat/completions", body=body,
                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    for _ in range(5):
        assert response.readline().startswith(b"data:")
        response.readline()
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


def _post(front, path, data: bytes, **headers):
    import requests

    return requests.post(front + path, data=data, timeout=60, headers={
        "Authorization": f"Bearer {KEY}", "Content-Type": "application/json", **headers})


def _serves(oai):
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "What is the capital of France?"}],
                                    max_tokens=12, temperature=0)
    return "Paris" in r.choices[0].message.content


def _chunked(size: int):
    head = json.dumps({"model": MODEL, "prompt": ""})[:-2].encode()  # '{"model": ..., "prompt": "'
    yield head
    for _ in range(size >> 20):
        yield b"a" * (1 << 20)
    yield b'"}'


BAD_BODIES = [
    ("/v1/chat/completions", json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "\ud800 hi"}]}).encode(),
     400, "messages[0].content", "lone UTF-16 surrogate"),
    ("/v1/completions", b'{"model": "%s", "prompt": "x \\udfff"}' % MODEL.encode(), 400, "prompt", "lone UTF-16 surrogate"),
    ("/v1/chat/completions", b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400, None,
     "deeper than"),
    ("/v1/completions", b'{"model": "m", "prompt": "\xff\xfe"}', 400, None, "not valid UTF-8"),
    ("/v1/completions", b'{"model": "m", "prompt": ', 400, None, "not valid JSON"),
    ("/v1/completions", json.dumps({"model": MODEL, "prompt": "a" * (64 << 20)}).encode(), 413, None, "1048576 bytes"),
    ("/v1/completions", "chunked", 413, None, "1048576 bytes"),  # no Content-Length: counted as it arrives
]


@pytest.mark.parametrize("path,body,status,param,needle", BAD_BODIES,
                         ids=["surrogate-chat", "surrogate-prompt", "deep", "not-utf8", "not-json", "64MiB", "64MiB-chunked"])
def test_bad_bodies_get_openai_errors_and_the_front_keeps_serving(front, oai, path, body, status, param, needle):
    response = _post(front, path, _chunked(64 << 20) if body == "chunked" else body)
    assert response.status_code == status, response.text[:300]
    error = response.json()["error"]
    assert needle in error["message"] and error["param"] == param and error["type"] == "invalid_request_error"
    assert _serves(oai)


def test_unknown_routes_answer_in_the_openai_shape(front):
    response = _post(front, "/v1/nothing", b"{}")
    assert response.status_code == 404 and response.json()["error"]["message"] == "Invalid URL (POST /v1/nothing)"


def test_continuous_usage_stats_put_the_usage_so_far_on_every_chunk(oai):
    """vLLM's stream_options.continuous_usage_stats (guidellm sends it with ignore_eos)."""
    chunks = list(oai.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Count to twenty."}], max_tokens=12, stream=True,
        stream_options={"include_usage": True, "continuous_usage_stats": True}, extra_body={"ignore_eos": True}))
    assert all(c.usage is not None for c in chunks)
    counts = [c.usage.completion_tokens for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 12 and len(set(counts)) > 3
    assert {c.usage.prompt_tokens for c in chunks} == {chunks[-1].usage.prompt_tokens} and chunks[-1].usage.prompt_tokens > 5


def test_vllm_request_id_names_the_response(oai):
    r = oai.completions.create(model=MODEL, prompt="1, 2, 3,", max_tokens=4, extra_body={"request_id": "bench-7"})
    assert r.id == "cmpl-bench-7"


@pytest.mark.parametrize("extra,param", [
    ({"stop_token_ids": [2]}, "stop_token_ids"),
    ({"chat_template_kwargs": {"enable_thinking": False}}, "chat_template_kwargs"),
    ({"continue_final_message": True}, "continue_final_message"),
    ({"add_generation_prompt": False}, "add_generation_prompt"),
    ({"stop": ["x"], "include_stop_str_in_output": True}, "include_stop_str_in_output"),
    ({"use_beam_search": True}, "use_beam_search"),
])
def test_vllm_extensions_the_engines_cannot_do_are_refused_by_name(oai, extra, param):
    with pytest.raises(openai.BadRequestError) as e:
        oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                                    extra_body=extra)
    assert e.value.body["param"] == param and e.value.body["code"] == "unsupported_parameter"


def test_vllm_extensions_at_their_defaults_are_accepted(oai):
    """What vLLM-style clients send by default: min_p 0, length_penalty 1, stop_token_ids [], ..."""
    r = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=3, extra_body={
        "min_p": 0.0, "length_penalty": 1.0, "stop_token_ids": [], "include_stop_str_in_output": True,
        "add_generation_prompt": True, "spaces_between_special_tokens": True, "guided_decoding_backend": "xgrammar",
        "include_reasoning": True, "min_tokens": 3, "ignore_eos": True})
    assert r.usage.completion_tokens == 3
