"""The prompt's log probs through the whole pipeline (issue 47): /v1/completions with `echo`,
`logprobs` and `max_tokens: 0` (what lm-evaluation-harness's loglikelihood requests send) and
vLLM's `prompt_logprobs`, against the default engine (exact numerics: the scorer is compiled and
answers top_logprobs).  The numbers are the engine's: the scorer over the served IR, as computed
in this process, and the same as the generated tokens' log probs for the same tokens."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

import pytest

from tests.integration.openai_front_process import MODEL, running_front

pytestmark = [pytest.mark.server]
PROMPT = "The capital of France is"


def _post(base: str, body: dict, path: str = "/v1/completions") -> tuple[int, dict]:
    request = urllib.request.Request(base + path, json.dumps({"model": MODEL} | body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def front(server, default_engine, tmp_path_factory):
    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp("front-log"),
                       "--tokenizer", str(default_engine)) as base:
        yield base


def in_process_scores(engine_dir, ids: list[int]):
    """The scorer over the served IR with the served (exact) numerics, in this process."""
    from build_engines.fidelity.openvino_engine import compile_properties
    from build_engines.openvino.numerics import EXACT
    from model_repository.engine_step.prompt_logprobs import score_prompt
    from model_repository.engines.openvino.ir_scorer import IrScorer

    # inference_threads 0: OpenVINO's default, as the rendered engine model (contract/model_configs.py)
    return score_prompt(IrScorer(engine_dir, compile_properties(engine_dir, EXACT, 0)), ids, 1)


def test_echo_logprobs_max_tokens_zero_scores_the_prompt_with_the_engines_numbers(front, default_engine):
    from tokenizers import Tokenizer

    status, body = _post(front, {"prompt": PROMPT, "echo": True, "logprobs": 1, "max_tokens": 0, "temperature": 0})
    assert status == 200, body
    choice = body["choices"][0]
    lp = choice["logprobs"]
    ids = Tokenizer.from_file(str(default_engine / "tokenizer.json")).encode(PROMPT).ids
    assert choice["text"] == PROMPT and body["usage"]["completion_tokens"] == 0
    assert "".join(lp["tokens"]) == PROMPT and len(lp["tokens"]) == len(ids) == body["usage"]["prompt_tokens"]
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(isinstance(x, float) and x <= 0 for x in lp["token_logprobs"][1:])
    assert all(max(top.values()) >= x for x, top in zip(lp["token_logprobs"][1:], lp["top_logprobs"][1:]))
    # the same prompt as token ids (lm-evaluation-harness's default): the same answer
    status, as_ids = _post(front, {"prompt": [ids], "echo": True, "logprobs": 1, "max_tokens": 0})
    assert status == 200 and as_ids["choices"][0]["logprobs"] == lp, as_ids
    mine = in_process_scores(default_engine, ids)
    gap = max(abs(a - float(b)) for a, b in zip(lp["token_logprobs"][1:], mine.log_probs[1:]))
    print(f"\nprompt log probs {lp['token_logprobs']}: served vs in-process scorer, largest gap {gap:.2e} nats")
    assert lp["token_logprobs"][1:] == pytest.approx([float(x) for x in mine.log_probs[1:]], abs=1e-3)


def test_a_scored_prompt_agrees_with_the_generated_tokens_log_probs(front):
    """Generate greedily with logprobs (the scorer's numbers: top_logprobs), then score prompt + answer."""
    status, generated = _post(front, {"prompt": PROMPT, "max_tokens": 6, "logprobs": 1, "temperature": 0})
    assert status == 200, generated
    answer = generated["choices"][0]
    status, scored = _post(front, {"prompt": PROMPT + answer["text"], "echo": True, "logprobs": 1, "max_tokens": 0})
    assert status == 200, scored
    tokens, lps = scored["choices"][0]["logprobs"]["tokens"], scored["choices"][0]["logprobs"]["token_logprobs"]
    n = len(answer["logprobs"]["tokens"])
    if tokens[-n:] != answer["logprobs"]["tokens"]:
        pytest.skip(f"the answer re-tokenizes differently: {tokens[-n:]} vs {answer['logprobs']['tokens']}")
    gap = max(abs(a - b) for a, b in zip(lps[-n:], answer["logprobs"]["token_logprobs"]))
    print(f"\n{n} generated tokens scored again as prompt: largest gap {gap:.2e} nats")
    assert lps[-n:] == pytest.approx(answer["logprobs"]["token_logprobs"], abs=2e-3)
    # each greedy token is its position's most likely one in the scored prompt
    tops = scored["choices"][0]["logprobs"]["top_logprobs"][-n:]
    assert all(math.isclose(max(t.values()), x, abs_tol=1e-6) for t, x in zip(tops, lps[-n:]))


def test_echo_with_generation_and_vllm_prompt_logprobs(front):
    status, body = _post(front, {"prompt": PROMPT, "echo": True, "logprobs": 2, "max_tokens": 3, "temperature": 0,
                                 "prompt_logprobs": 1})
    assert status == 200, body
    choice = body["choices"][0]
    prompt_n = body["usage"]["prompt_tokens"]
    lp = choice["logprobs"]
    assert choice["text"].startswith(PROMPT) and len(lp["tokens"]) == prompt_n + body["usage"]["completion_tokens"]
    assert lp["token_logprobs"][0] is None and all(x is not None for x in lp["token_logprobs"][1:])
    assert lp["text_offset"] == sorted(lp["text_offset"]) and len(lp["top_logprobs"][1]) <= 3
    entries = choice["prompt_logprobs"]
    assert len(entries) == prompt_n and entries[0] is None
    for entry, x in zip(entries[1:], lp["token_logprobs"][1:prompt_n]):
        assert x in [e["logprob"] for e in entry.values()] and 1 <= len(entry) <= 2


def test_vllm_prompt_logprobs_on_chat_score_the_rendered_template(front):
    status, body = _post(front, {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                                 "prompt_logprobs": 2}, "/v1/chat/completions")
    assert status == 200, body
    entries = body["prompt_logprobs"]  # on the response, as vLLM's ChatCompletionResponse
    assert len(entries) == body["usage"]["prompt_tokens"] and entries[0] is None
    assert all(2 <= len(e) <= 3 and all(v["logprob"] <= 0 for v in e.values()) for e in entries[1:])
    assert "<|im_start|>" in [v["decoded_token"] for e in entries[1:] for v in e.values()]


@pytest.mark.parametrize("body, param", [
    ({"max_tokens": 0}, "max_tokens"),
    ({"echo": True, "logprobs": 1, "max_tokens": 0, "stream": True}, "stream"),
    ({"prompt_logprobs": 21}, "prompt_logprobs"),
])
def test_refusals_name_the_parameter(front, body, param):
    status, error = _post(front, {"prompt": PROMPT} | body)
    assert status == 400 and error["error"]["param"] == param, error


@pytest.mark.parametrize("model", ["ensemble", "tensorrt_llm_bls"])
def test_the_ensemble_the_bls_and_the_client_carry_them(server, model):
    from client import LlmClient
    from client.types import SamplingParams

    with LlmClient(server.settings.grpc_url, model=model) as client:
        result = client.generate(PROMPT, SamplingParams(max_tokens=2, temperature=0.0, prompt_logprobs=2))
        plain = client.generate(PROMPT, SamplingParams(max_tokens=2, temperature=0.0))
    prompt = result.prompt_logprobs
    assert len(prompt.token_ids) == result.prompt_tokens and prompt.log_probs[0] is None
    assert prompt.top_logprobs[0] == () and all(len(t) == 2 for t in prompt.top_logprobs[1:])
    assert all(lp <= t[0][1] for lp, t in zip(prompt.log_probs[1:], prompt.top_logprobs[1:]))
    assert plain.prompt_logprobs is None and plain.text == result.text  # nothing else changes
