"""The front's refusals of bodies it cannot serve (openai_front/bodies.py) and of vLLM's
extensions the engines cannot honour (openai_front/params.py), on the ASGI app without a server."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from openai_front.app import FrontSettings, create_app
from openai_front.bodies import MAX_JSON_DEPTH, body_problem
from openai_front.params import REFUSE, VLLM_EXTENSIONS
from openai_front.schemas import ChatCompletionRequest, CompletionRequest

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def app():
    with TestClient(create_app(FrontSettings(grpc_url="127.0.0.1:1", model_name="m", max_body_bytes=4096))) as c:
        yield c


def test_lone_surrogates_are_named_by_their_field():
    body = json.dumps({"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": "a \ud800"}]})
    problem = body_problem(body.encode(), "application/json")
    assert problem.status == 400 and problem.param == "messages[1].content"
    assert "\\ud800 at character 2" in problem.message
    assert body_problem(json.dumps({"messages": "😀 é"}).encode(), None) is None  # real astral text is fine


def test_depth_beyond_the_limit_and_recursion_are_400s():
    assert body_problem(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, "application/json") is None
    for depth in (MAX_JSON_DEPTH + 1, 100_000):
        problem = body_problem(b"[" * depth + b"]" * depth, "application/json")
        assert problem.status == 400 and "deeper than" in problem.message


def test_bodies_that_are_not_json_are_left_to_the_schema():
    assert body_problem(b"\xff", "text/plain") is None
    assert "not valid UTF-8" in body_problem(b'{"a": "\xff"}', "application/json").message


@pytest.mark.parametrize("path,body,status,needle", [
    ("/v1/chat/completions", '{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}', 400, "surrogate"),
    ("/v1/completions", '{"model": "m", "prompt": ' + "[" * 500 + "]" * 500 + "}", 400, "deeper than"),
    ("/v1/completions", json.dumps({"model": "m", "prompt": "a" * 5000}), 413, "4096 bytes"),
    ("/v1/nothing", "{}", 404, "Invalid URL"),
])
def test_the_app_answers_in_the_openai_shape(app, path, body, status, needle):
    response = app.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == status and needle in response.json()["error"]["message"]


def test_a_chunked_body_over_the_limit_is_refused_while_it_arrives(app):
    sent = []

    def chunks():
        for _ in range(64):
            sent.append(1)
            yield b"a" * 1024

    response = app.post("/v1/completions", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413 and "4096 bytes" in response.json()["error"]["message"]


def test_every_vllm_extension_is_a_field_of_the_endpoints_it_names():
    for name, extension in VLLM_EXTENSIONS.items():
        for endpoint in extension.endpoints:
            model = ChatCompletionRequest if endpoint == "chat" else CompletionRequest
            assert name in model.model_fields, (name, endpoint)
        assert extension.policy.why or extension.policy.action != REFUSE, name


@pytest.mark.parametrize("extra,param", [
    ({"stop_token_ids": [7]}, "stop_token_ids"), ({"cache_salt": "s"}, "cache_salt"),
    ({"spaces_between_special_tokens": False}, "spaces_between_special_tokens"),
    ({"chat_template_kwargs": {"x": 1}}, "chat_template_kwargs"),
    ({"add_generation_prompt": False}, "add_generation_prompt"),
])
def test_refused_extensions_name_themselves(app, extra, param):
    response = app.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES, **extra})
    assert response.status_code == 400 and response.json()["error"]["param"] == param, response.text


def test_add_special_tokens_on_completions_is_the_deployments(app):
    response = app.post("/v1/completions", json={"model": "m", "prompt": "hi", "add_special_tokens": False})
    assert response.json()["error"]["param"] == "add_special_tokens"
