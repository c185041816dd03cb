"""Issue 12 on the CPU engine, driven with the official `openai` package through the front and
with the gRPC client: log probabilities (checked against a Hugging Face fp32 forward pass),
n samples, structured output (JSON schema, json_object, regex)."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from build_engines.fidelity.logprob_agreement import LOGPROB_TOLERANCE
from client import Guide, LlmClient, SamplingParams
from tests.integration.openai_front_process import MODEL, running_front

pytestmark = pytest.mark.server

# The served engine has INT8 weights and OpenVINO's CPU activations (bf16 where the CPU has
# it, f32 on AVX2-only hosts) and a u8 KV cache; the reference is the float32 checkpoint.
# Measured for this engine (DESIGN.md section 6): mean KLD 0.004 per position, top-1 96%.
# Measured here, 32 greedy tokens: mean |delta logprob| 0.043 nats, max 0.159 (2026-11-23,
# AMD Zen 4).  Tolerances: mean <= 0.08 and every token <= 0.35 nats (a 30% relative error
# in one token's probability) leave room for another host's activation dtype, while the log
# prob of the neighbouring position (an off-by-one) is checked to be far outside them.
MEAN_TOL, MAX_TOL = 0.08, 0.35


@pytest.fixture(scope="module")
def front(server, default_engine, tmp_path_factory):
    with running_front(server.settings.grpc_url, tmp_path_factory.mktemp("front-log"), "--tokenizer", str(default_engine)) as base:
        yield base


@pytest.fixture
def oai(front):
    return openai.OpenAI(base_url=front + "/v1", api_key="none", max_retries=0)


def _hf_distributions(checkpoint, prompt: str, generated: list[int]):
    """[len(generated), vocab]: the float32 checkpoint's log-softmax at each generated position."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.float32).eval()
    prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
    ids = torch.tensor([prompt_ids + generated])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    start = len(prompt_ids) - 1
    return torch.log_softmax(logits, dim=-1)[start:start + len(generated)]


def _hf_log_probs(checkpoint, prompt: str, generated: list[int]) -> list[float]:
    log_probs = _hf_distributions(checkpoint, prompt, generated)
    return [float(log_probs[i, t]) for i, t in enumerate(generated)]


LOGPROB_PROMPT = "The three primary colors are"


def _served_log_probs(server):
    with LlmClient(server.settings.grpc_url) as client:
        return client.generate(LOGPROB_PROMPT, SamplingParams(max_tokens=32, temperature=0, return_log_probs=True))


def test_logprobs_agree_with_hf_fp32(server, default_checkpoint):
    """Also run by the GPU pipeline (tests/integration/test_gpu_pipeline.py) on TensorRT-LLM."""
    prompt = LOGPROB_PROMPT
    result = _served_log_probs(server)
    assert len(result.log_probs) == len(result.token_ids) == result.completion_tokens
    reference = _hf_log_probs(default_checkpoint, prompt, result.token_ids)
    deltas = [abs(a - b) for a, b in zip(result.log_probs, reference)]
    print(f"logprob |delta| vs HF fp32 over {len(deltas)} tokens: mean {sum(deltas) / len(deltas):.4f} "
          f"max {max(deltas):.4f}")
    assert sum(deltas) / len(deltas) <= MEAN_TOL and max(deltas) <= MAX_TOL
    shifted = [abs(a - b) for a, b in zip(result.log_probs[1:], reference)]
    assert sum(shifted) / len(shifted) > 4 * MEAN_TOL  # the tolerance tells positions apart


def test_completion_logprobs_through_the_front(server, oai):
    """The same numbers through the front (completions: legacy lists, a token text per entry)."""
    prompt = LOGPROB_PROMPT
    result = _served_log_probs(server)
    out = oai.completions.create(model=MODEL, prompt=prompt, max_tokens=32, temperature=0, logprobs=0)
    lp = out.choices[0].logprobs
    assert lp.token_logprobs == pytest.approx(result.log_probs, abs=1e-4)
    assert "".join(lp.tokens).startswith(out.choices[0].text) and out.usage.completion_tokens == len(lp.tokens)


def test_chat_logprobs_whole_and_streamed(oai):
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    whole = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=16, temperature=0,
                                        logprobs=True, top_logprobs=0)
    content = whole.choices[0].logprobs.content
    assert content and all(c.logprob <= 0 and bytes(c.bytes).decode("utf-8", "replace") for c in content)
    assert whole.choices[0].message.content in "".join(c.token for c in content)
    streamed = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=16, temperature=0,
                                           logprobs=True, stream=True)
    entries = [e for ch in streamed for c in ch.choices if c.logprobs for e in c.logprobs.content]
    assert [e.token for e in entries] == [c.token for c in content]
    assert [e.logprob for e in entries] == pytest.approx([c.logprob for c in content], abs=1e-4)
    with pytest.raises(openai.BadRequestError, match="top_logprobs"):
        oai.chat.completions.create(model=MODEL, messages=messages, logprobs=True, top_logprobs=21)


TOP_K = 5


def _served_top_logprobs(grpc_url: str, model: str | None = None):
    from contract import names

    with LlmClient(grpc_url, model=model or names.ENSEMBLE) as client:
        return client.generate(LOGPROB_PROMPT, SamplingParams(max_tokens=32, temperature=0, top_logprobs=TOP_K))


# The CPU engine's alternatives come from its IR run a second time (same weights and numerics
# settings, another summation order than the pipeline's paged attention).  A response that asks
# for them takes every log prob from that pass (engine_step/alternatives.py), so the greedy
# choice's log prob is its entry in the list; it is first unless another token is within
# LOGPROB_TOLERANCE of it (a tie of the two passes' rounding: measured 0.0002 nats at exact).


def check_top_logprobs(result, checkpoint) -> None:
    """Each generated position's TOP_K alternatives: most likely first, holding the greedy choice
    (first unless a tie) with the log prob output_log_probs gave it, and each
    likely alternative's (p > 2%) log prob as the float32 checkpoint's within the chosen tokens'
    tolerances (MEAN_TOL, MAX_TOL).  Unlikely ones are further off in nats (an INT8 engine's error
    is relative to the probability: measured mean 0.09, max 0.61 over all 5 x 32 entries), so all
    entries get twice the mean tolerance and at most 1 nat, and the set of 5 must be the
    reference's 5 for at least 80% of the entries."""
    tops = result.top_logprobs
    assert len(tops) == len(result.token_ids) == result.completion_tokens
    reference = _hf_distributions(checkpoint, LOGPROB_PROMPT, result.token_ids)
    deltas, likely, chosen_deltas, first, ref_top1, shared = [], [], [], 0, 0, 0
    for i, (chosen, lp, alternatives) in enumerate(zip(result.token_ids, result.log_probs, tops)):
        ids = [t for t, _ in alternatives]
        lps = [a for _, a in alternatives]
        assert len(ids) == TOP_K == len(set(ids)) and lps == sorted(lps, reverse=True) and lps[0] <= 0
        assert chosen in ids, (i, alternatives, chosen, lp)
        mine = lps[ids.index(chosen)]
        chosen_deltas.append(abs(mine - lp))
        assert mine == pytest.approx(lp, abs=1e-6), (i, alternatives, chosen, lp)  # one distribution
        assert ids[0] == chosen or lps[0] - mine <= LOGPROB_TOLERANCE, (i, alternatives, chosen, lp)
        first += ids[0] == chosen
        deltas += [abs(a - float(reference[i, t])) for t, a in alternatives]
        likely += [abs(a - float(reference[i, t])) for t, a in alternatives if float(reference[i, t]) > -3.9]
        ref_top1 += int(reference[i].argmax()) == ids[0]
        shared += len(set(ids) & set(reference[i].topk(TOP_K).indices.tolist()))
    print(f"top-{TOP_K} log probs |delta| vs HF fp32 over {len(deltas)} entries: mean {sum(deltas) / len(deltas):.4f} "
          f"max {max(deltas):.4f} (p > 2%: {len(likely)} entries, mean {sum(likely) / len(likely):.4f} max "
          f"{max(likely):.4f}); {shared}/{len(deltas)} in the reference's top {TOP_K}; the greedy choice first at {first}/{len(tops)} positions, its log prob within "
          f"{max(chosen_deltas):.4f} of output_log_probs; the reference's top-1 first at {ref_top1}/{len(tops)}")
    assert sum(likely) / len(likely) <= MEAN_TOL and max(likely) <= MAX_TOL
    assert sum(deltas) / len(deltas) <= 2 * MEAN_TOL and max(deltas) <= 1.0 and shared >= 0.8 * len(deltas)
    assert first >= len(tops) - 2 and ref_top1 >= len(tops) - 3


def test_top_logprobs_agree_with_hf_fp32(server, default_checkpoint):
    """The CPU engine's alternatives (its IR scored beside the pipeline), through the ensemble and
    the BLS, streamed and whole."""
    from contract import names

    result = _served_top_logprobs(server.settings.grpc_url)
    check_top_logprobs(result, default_checkpoint)
    bls = _served_top_logprobs(server.settings.grpc_url, names.LLM_BLS)
    assert bls.token_ids == result.token_ids
    assert [[t for t, _ in p] for p in bls.top_logprobs] == [[t for t, _ in p] for p in result.top_logprobs]
    with LlmClient(server.settings.grpc_url) as client:
        streamed = client.generate(LOGPROB_PROMPT, SamplingParams(max_tokens=32, temperature=0, top_logprobs=TOP_K),
                                   stream=True)
    assert streamed.token_ids == result.token_ids
    for a, b in zip(streamed.top_logprobs, result.top_logprobs):
        assert [t for t, _ in a] == [t for t, _ in b] and [x for _, x in a] == pytest.approx([x for _, x in b], abs=1e-4)


def test_top_logprobs_without_log_probs_is_refused(server):
    from tests.integration.test_bad_requests import raw_request

    _, error = raw_request(server.settings.grpc_url, text_input="hi", top_logprobs=3)
    assert error is not None and "[INVALID_ARG]" in error.message()
    assert "'top_logprobs' needs 'return_log_probs' true" in error.message()


def test_relay_layout_carries_top_logprobs(server, relay_server):
    """Behind a relay (the non-decoupled CPU deployment, the GPU wiring in front of the CPU
    engine) top_logprobs reaches the engine and its alternatives come back, as without one."""
    from contract import names

    direct = _served_top_logprobs(server.settings.grpc_url)
    for model in (names.ENSEMBLE, names.LLM_BLS):
        relayed = _served_top_logprobs(relay_server.settings.grpc_url, model)
        assert relayed.token_ids == direct.token_ids and len(relayed.top_logprobs) == len(direct.top_logprobs)
        assert [[t for t, _ in p] for p in relayed.top_logprobs] == [[t for t, _ in p] for p in direct.top_logprobs]


def test_top_logprobs_through_the_front(oai):
    """Chat top_logprobs and completions logprobs = k, whole and streamed, as OpenAI shapes them."""
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    kwargs = dict(model=MODEL, messages=messages, max_tokens=12, temperature=0, logprobs=True, top_logprobs=3)
    content = oai.chat.completions.create(**kwargs).choices[0].logprobs.content
    assert content and all(len(c.top_logprobs) == 3 and c.token in [t.token for t in c.top_logprobs] for c in content)
    assert all(next(t.logprob for t in c.top_logprobs if t.token == c.token) == pytest.approx(c.logprob, abs=1e-5)
               for c in content)
    assert all(c.top_logprobs[0].logprob >= c.top_logprobs[1].logprob >= c.top_logprobs[2].logprob for c in content)
    streamed = [e for ch in oai.chat.completions.create(stream=True, **kwargs) for c in ch.choices if c.logprobs
                for e in c.logprobs.content]
    assert [[t.token for t in e.top_logprobs] for e in streamed] == [[t.token for t in c.top_logprobs] for c in content]
    legacy = oai.completions.create(model=MODEL, prompt=LOGPROB_PROMPT, max_tokens=8, temperature=0, logprobs=2)
    lp = legacy.choices[0].logprobs
    assert len(lp.top_logprobs) == len(lp.tokens) and all(2 <= len(top) <= 3 for top in lp.top_logprobs)
    # every number from one distribution: the token's log prob is its own entry
    assert all(top[token] == pytest.approx(chosen, abs=1e-5) for top, token, chosen
               in zip(lp.top_logprobs, lp.tokens, lp.token_logprobs))


def test_n_samples_whole_streamed_and_seeded(oai):
    messages = [{"role": "user", "content": "Write a one-line poem about the sea."}]
    kwargs = dict(model=MODEL, messages=messages, max_tokens=24, n=3, temperature=1.0, seed=11, logprobs=True)
    whole = oai.chat.completions.create(**kwargs)
    assert [c.index for c in whole.choices] == [0, 1, 2]
    texts = [c.message.content for c in whole.choices]
    assert len(set(texts)) > 1  # independent samples
    # usage counts every generated token; logprobs join to the content, so a choice's end-of-turn
    # token (finish "stop": no stop strings here) is counted but has no logprob entry
    ended = sum(c.finish_reason == "stop" for c in whole.choices)
    assert whole.usage.completion_tokens == sum(len(c.logprobs.content) for c in whole.choices) + ended
    assert [c.message.content for c in oai.chat.completions.create(**kwargs).choices] == texts  # same seed
    parts: dict[int, list[str]] = {0: [], 1: [], 2: []}
    finishes: dict[int, list[str]] = {0: [], 1: [], 2: []}
    usage = None
    for chunk in oai.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}):
        usage = chunk.usage or usage
        for c in chunk.choices:
            parts[c.index].append(c.delta.content or "")
            if c.finish_reason:
                finishes[c.index].append(c.finish_reason)
    assert ["".join(parts[i]) for i in range(3)] == texts
    assert all(len(f) == 1 for f in finishes.values())
    assert usage.completion_tokens == whole.usage.completion_tokens
    completions = oai.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=12, n=2, seed=3)
    assert [c.index for c in completions.choices] == [0, 1] and all(c.finish_reason for c in completions.choices)


SCHEMAS = [
    {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 1,
                                                                                 "maximum": 99}},
     "required": ["city", "population"], "additionalProperties": False},
    {"type": "object", "properties": {"colors": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
                                                 "minItems": 2, "maxItems": 3}},
     "required": ["colors"], "additionalProperties": False},
    {"type": "object", "properties": {
        "person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                                    "code": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}},
                   "required": ["name", "code"], "additionalProperties": False},
        "ok": {"type": "boolean"}}, "required": ["person", "ok"], "additionalProperties": False},
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=["bounds", "enum-array", "nested-pattern"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_json_schema_answers_validate(oai, schema, stream):
    kwargs = dict(model=MODEL, max_tokens=96, temperature=0, messages=[
        {"role": "user", "content": "Describe a city as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}})
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in oai.chat.completions.create(**kwargs, stream=True)
                       if c.choices)
    else:
        text = oai.chat.completions.create(**kwargs).choices[0].message.content
    jsonschema.validate(json.loads(text), schema)


def test_json_object_regex_and_refusals(oai):
    out = oai.chat.completions.create(model=MODEL, max_tokens=400, temperature=0, response_format={"type": "json_object"},
                                      messages=[{"role": "user", "content": "Return a JSON object with the keys name and age for a cat named Tom who is 3 years old."}])
    assert out.choices[0].finish_reason == "stop"  # a length cut is the one way to an incomplete document
    assert isinstance(json.loads(out.choices[0].message.content), dict)
    out = oai.completions.create(model=MODEL, prompt="Today's date:", max_tokens=16, temperature=0,
                                 extra_body={"guided_regex": r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]"})
    assert __import__("re").fullmatch(r"20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]", out.choices[0].text)
    # a guide that does not compile is a 400 before it reaches the engine (where it would wedge
    # OpenVINO's pipeline for every request: contract/guided.py), and the engine serves on
    for bad in ({"guided_regex": "([a-"}, {"guided_grammar": "root ::= foo"},
                {"guided_json": {"type": "object", "properties": {"a": {"type": "string", "pattern": "[a-"}}}}):
        with pytest.raises(openai.BadRequestError, match="does not compile"):
            oai.completions.create(model=MODEL, prompt="x", max_tokens=4, extra_body=bad)
    assert oai.completions.create(model=MODEL, prompt="Hello", max_tokens=4).choices[0].text
    with pytest.raises(openai.BadRequestError, match="uniqueItems"):
        oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}})


def test_vllm_guided_choice_and_structured_outputs_answer_one_of_the_choices(oai):
    choices = ["positive", "negative", "neutral"]
    ask = [{"role": "user", "content": "Classify the sentiment: 'I love this phone.'"}]
    for extra in ({"guided_choice": choices}, {"structured_outputs": {"choice": choices}}):
        out = oai.chat.completions.create(model=MODEL, messages=ask, max_tokens=8, temperature=0, extra_body=extra)
        assert out.choices[0].message.content in choices and out.choices[0].finish_reason == "stop"
    out = oai.completions.create(model=MODEL, prompt="Today's date:", max_tokens=16, temperature=0,
                                 extra_body={"structured_outputs": {"regex": r"20[0-9]{2}-[0-1][0-9]"}})
    assert __import__("re").fullmatch(r"20[0-9]{2}-[0-1][0-9]", out.choices[0].text)
    with pytest.raises(openai.BadRequestError, match="structural_tag"):
        oai.chat.completions.create(model=MODEL, messages=ask, max_tokens=4,
                                    extra_body={"structured_outputs": {"structural_tag": "{}"}})


def test_grpc_client_typed_options(server):
    with LlmClient(server.settings.grpc_url) as client:
        results = client.generate_n("Pick a number:", SamplingParams(
            max_tokens=8, n=2, temperature=1.0, seed=5, return_log_probs=True,
            guide=Guide("regex", "[1-9][0-9]?")))
    assert len(results) == 2
    for r in results:
        assert __import__("re").fullmatch("[1-9][0-9]?", r.text) and len(r.log_probs) == r.completion_tokens


GUIDED_SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                                "age": {"type": "integer", "minimum": 0, "maximum": 30},
                                                "color": {"enum": ["black", "white", "orange"]}},
                 "required": ["name", "age", "color"], "additionalProperties": False}


def check_guided_decoding(grpc_url: str, oai_client) -> None:
    """A JSON schema through the gRPC client and the OpenAI front (whole and streamed): every
    answer validates; a keyword the grammar would drop is a 400 naming it."""
    with LlmClient(grpc_url) as client:
        result = client.generate("Describe a cat as JSON.", SamplingParams(
            max_tokens=96, temperature=0, guide=Guide("json_schema", json.dumps(GUIDED_SCHEMA))))
    jsonschema.validate(json.loads(result.text), GUIDED_SCHEMA)
    response_format = {"type": "json_schema", "json_schema": {"name": "cat", "schema": GUIDED_SCHEMA, "strict": True}}
    kwargs = dict(model=MODEL, max_tokens=96, temperature=0, response_format=response_format,
                  messages=[{"role": "user", "content": "Describe a cat as JSON."}])
    whole = oai_client.chat.completions.create(**kwargs).choices[0].message.content
    streamed = "".join(c.choices[0].delta.content or "" for c in oai_client.chat.completions.create(stream=True, **kwargs)
                       if c.choices)
    assert whole == streamed
    jsonschema.validate(json.loads(whole), GUIDED_SCHEMA)
    with pytest.raises(openai.BadRequestError, match="uniqueItems"):
        oai_client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "uniqueItems": True}}})


def check_n_samples(grpc_url: str, oai_client, seeded: bool = True) -> None:
    """n samples through the gRPC client (streamed) and the OpenAI front (whole and streamed):
    n texts, each choice with its index and finish_reason, usage counting every sample, and,
    where the engine honours a seed (`seeded`; TorchSampler at 1.2.1 refuses one), the same n
    answers again with the same seed."""
    seed = (lambda value: value) if seeded else (lambda value: None)
    with LlmClient(grpc_url) as client:
        results = client.generate_n("Name a fruit:", SamplingParams(max_tokens=12, n=3, temperature=1.0, seed=seed(11)))
        guided = client.generate_n("Pick a number:", SamplingParams(max_tokens=8, n=2, temperature=1.0, seed=seed(5),
                                                                    guide=Guide("regex", "[1-9][0-9]?")))
    assert len(results) == 3 and all(r.text and r.finish_reason in ("stop", "length") for r in results)
    assert len(guided) == 2 and all(__import__("re").fullmatch("[1-9][0-9]?", r.text) for r in guided)
    kwargs = dict(model=MODEL, max_tokens=12, n=3, temperature=1.0, messages=[{"role": "user", "content": "Name a fruit."}])
    if seeded:
        kwargs["seed"] = 11
    whole = oai_client.chat.completions.create(**kwargs)
    assert sorted(c.index for c in whole.choices) == [0, 1, 2] and all(c.finish_reason for c in whole.choices)
    assert whole.usage.completion_tokens >= 3
    texts: dict[int, str] = {}
    finished: dict[int, str] = {}
    for chunk in oai_client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + (choice.delta.content or "")
            if choice.finish_reason:
                finished[choice.index] = choice.finish_reason
    assert sorted(finished) == [0, 1, 2]
    if seeded:
        assert [texts[i] for i in range(3)] == [c.message.content for c in sorted(whole.choices, key=lambda c: c.index)]
    else:
        assert all(texts[i] for i in range(3))


def test_standin_layout_honours_guides_and_n(standin_server, default_engine, tmp_path):
    """The engine flow renders TensorRT-LLM's xgrammar guided decoder (guided_decoding_backend
    and the tokenizer info beside the engine) and relays n samples (one closing response per
    sample); its stand-in answers as the C++ backend would (rows output.sequence_results,
    guided.*), generating with the CPU engine."""
    from client import InvalidRequestError

    with running_front(standin_server.settings.grpc_url, tmp_path, "--tokenizer", str(default_engine)) as base:
        oai_client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        check_guided_decoding(standin_server.settings.grpc_url, oai_client)
        check_n_samples(standin_server.settings.grpc_url, oai_client)
    with LlmClient(standin_server.settings.grpc_url) as client:
        # NVIDIA's backend never sets the executor's request priority (contract/features.py)
        with pytest.raises(InvalidRequestError, match=r"'priority'.*request priorities.*TensorRT-LLM 1\.1\.0 \(engine flow\)"):
            client.generate("Hi", SamplingParams(max_tokens=4, priority=0.9))
        assert client.generate("Hi", SamplingParams(max_tokens=2, priority=0.5)).completion_tokens == 2
        # log probs: the stand-in returns the chosen tokens' log probs as the backend does, and no
        # alternatives (row output.output_log_probs): top_logprobs is refused by name
        with pytest.raises(InvalidRequestError, match=r"'top_logprobs'.*top-k log probabilities.*engine flow"):
            client.generate("Hi", SamplingParams(max_tokens=4, top_logprobs=2))
        result = client.generate(LOGPROB_PROMPT, SamplingParams(max_tokens=8, temperature=0, return_log_probs=True))
    assert len(result.log_probs) == len(result.token_ids) and all(lp <= 0 for lp in result.log_probs)
    assert any(lp < 0 for lp in result.log_probs)


def test_pytorch_layout_honours_guides_and_n(pytorch_server, default_engine, tmp_path):
    """The PyTorch backend maps guides onto SamplingParams.guided_decoding (GuidedDecodingParams;
    the LLM built with guided_decoding_backend xgrammar and its tokenizer) and n onto
    SamplingParams.n (one CompletionOutput per sample, each streamed with its sequence_index and
    ended by its own final), on the LLM API's stand-in."""
    with running_front(pytorch_server.settings.grpc_url, tmp_path, "--tokenizer", str(default_engine)) as base:
        oai_client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        check_guided_decoding(pytorch_server.settings.grpc_url, oai_client)
        check_n_samples(pytorch_server.settings.grpc_url, oai_client, seeded=False)  # 1.2.1 refuses seeds


def _schemas():
    """Hypothesis strategy: bounded object schemas (every string, array and number bounded, so
    every valid document is short and a generation that ends is complete)."""
    from hypothesis import strategies as st

    names = st.sampled_from(["name", "id", "tags", "score", "ok", "kind", "size", "meta"])
    words = st.lists(st.sampled_from(["red", "green", "blue", "small", "large"]), min_size=1, max_size=3, unique=True)
    leaf = st.one_of(
        st.builds(lambda n: {"type": "string", "maxLength": n}, st.integers(1, 12)),
        st.builds(lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
                  st.integers(-50, 50), st.integers(0, 100)),
        st.just({"type": "boolean"}),
        st.builds(lambda w: {"enum": w}, words),
        st.builds(lambda w, n: {"type": "array", "items": {"enum": w}, "minItems": 1, "maxItems": n}, words,
                  st.integers(1, 3)),
        st.just({"type": "string", "pattern": "^[a-z]{2,5}$"}),
    )

    def obj(children):
        return st.dictionaries(names, children, min_size=1, max_size=3).map(
            lambda props: {"type": "object", "properties": props, "required": sorted(props),
                           "additionalProperties": False})

    return st.recursive(leaf, obj, max_leaves=4).filter(lambda s: s.get("type") == "object")


def test_generated_schemas_validate(oai):
    """Hypothesis-generated schemas (nested objects, arrays, enums, required, patterns, bounds),
    whole and streamed alternately; derandomized so CI runs the same examples."""
    from hypothesis import HealthCheck, given, settings

    calls = []

    @settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(_schemas())
    def check(schema):
        stream = len(calls) % 2 == 1
        calls.append(schema)
        kwargs = dict(model=MODEL, max_tokens=160, temperature=0, messages=[
            {"role": "user", "content": "Fill in this JSON form."}],
            response_format={"type": "json_schema", "json_schema": {"name": "f", "schema": schema, "strict": True}})
        if stream:
            chunks = list(oai.chat.completions.create(**kwargs, stream=True))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = next(c.choices[0].finish_reason for c in reversed(chunks) if c.choices and c.choices[0].finish_reason)
        else:
            choice = oai.chat.completions.create(**kwargs).choices[0]
            text, finish = choice.message.content, choice.finish_reason
        assert finish == "stop", (schema, text)
        jsonschema.validate(json.loads(text), schema)

    check()
    assert len(calls) >= 4


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                     "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}}}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"],
    "additionalProperties": False}}}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("choice", ["named", "required"])
def test_tool_calls(oai, stream, choice):
    """tools + tool_choice (a named function, or required among two): guided JSON against the
    parameter schema, answered as tool_calls whose arguments validate."""
    tool_choice = {"type": "function", "function": {"name": "get_weather"}} if choice == "named" else "required"
    kwargs = dict(model=MODEL, max_tokens=80, temperature=0, tools=[WEATHER_TOOL, TIME_TOOL], tool_choice=tool_choice,
                  messages=[{"role": "user", "content": "What is the weather in Paris, in celsius?"}])
    if stream:
        calls, finish = {}, None
        for chunk in oai.chat.completions.create(**kwargs, stream=True):
            for c in chunk.choices:
                finish = c.finish_reason or finish
                for call in c.delta.tool_calls or []:
                    entry = calls.setdefault(call.index, {"name": "", "arguments": ""})
                    entry["name"] += call.function.name or ""
                    entry["arguments"] += call.function.arguments or ""
        name, arguments = calls[0]["name"], calls[0]["arguments"]
    else:
        out = oai.chat.completions.create(**kwargs).choices[0]
        finish, call = out.finish_reason, out.message.tool_calls[0]
        assert out.message.content is None and call.type == "function" and call.id
        name, arguments = call.function.name, call.function.arguments
    assert finish == "tool_calls"
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in (WEATHER_TOOL, TIME_TOOL)}
    assert name in schemas and (choice == "required" or name == "get_weather")
    jsonschema.validate(json.loads(arguments), schemas[name])


def test_relay_layout_carries_n_samples(relay_server):
    """The GPU wiring (ensemble -> engine_relay -> engine) with the CPU engine behind: the
    relay passes each response's sequence_index on, so the n samples stay apart."""
    with LlmClient(relay_server.settings.grpc_url) as client:
        sampling = SamplingParams(max_tokens=12, n=3, temperature=1.0, seed=3)
        streamed = client.generate_n("Write a poem:", sampling)
        whole = client.generate_n("Write a poem:", sampling, stream=False)
    assert [r.text for r in streamed] == [r.text for r in whole] and len({r.text for r in whole}) == 3
    assert all(r.finish_reason and r.completion_tokens == 12 for r in whole)


def test_pytorch_layout_refuses_greedy_n_and_priorities_and_returns_log_probs(pytorch_server):
    """Several greedy samples are refused as SamplingParams refuses them (row
    sampling.validate.greedy_best_of); priorities are not wired (contract/features.py
    PYTORCH_ENGINE); log probs are mapped (SamplingParams.logprobs)."""
    from client import InvalidRequestError

    with LlmClient(pytorch_server.settings.grpc_url) as client:
        with pytest.raises(InvalidRequestError, match=r"'num_return_sequences' 2 with greedy decoding"):
            client.generate_n("Hi", SamplingParams(max_tokens=4, n=2, temperature=0))
        with pytest.raises(InvalidRequestError, match=r"'priority'.*PyTorch backend"):
            client.generate("Hi", SamplingParams(max_tokens=4, priority=0.1))
        result = client.generate(LOGPROB_PROMPT, SamplingParams(max_tokens=8, temperature=0, return_log_probs=True))
    assert len(result.log_probs) == len(result.token_ids) and any(lp < 0 for lp in result.log_probs)


def test_pytorch_layout_returns_top_logprobs(pytorch_server, default_checkpoint):
    """SamplingParams.logprobs = k (row result.logprobs.top_k): the LLM's {token: Logprob} per
    position, on the LLM API's stand-in (which scores with the CPU engine's IR).  At 1.2.x those
    dicts hold the top k only, not the sampled token: log probs of sampled requests are refused
    rather than reported as a made-up number."""
    from client import InvalidRequestError

    check_top_logprobs(_served_top_logprobs(pytorch_server.settings.grpc_url), default_checkpoint)
    with LlmClient(pytorch_server.settings.grpc_url) as client:
        with pytest.raises(InvalidRequestError, match=r"'return_log_probs' with sampling.*1\.2\.1"):
            client.generate("Hi", SamplingParams(max_tokens=4, temperature=1.0, return_log_probs=True))


def test_bls_carries_n_samples_and_guides(server):
    """tensorrt_llm_bls (the ensemble's dataflow as BLS calls) gives the ensemble's n answers."""
    from contract import names

    sampling = SamplingParams(max_tokens=10, n=2, temperature=1.0, seed=9, guide=Guide("regex", "[a-z ]{4,12}"))
    with LlmClient(server.settings.grpc_url) as ensemble, LlmClient(server.settings.grpc_url, model=names.LLM_BLS) as bls:
        expected = [r.text for r in ensemble.generate_n("Say something:", sampling)]
        got = [r.text for r in bls.generate_n("Say something:", sampling)]
    assert got == expected and all(__import__("re").fullmatch("[a-z ]{4,12}", t) for t in got)
