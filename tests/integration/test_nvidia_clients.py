"""NVIDIA's own clients as a conformance suite: the exact requests their scripts send
(contract/upstream/data/nvidia_clients.json: tensors with their names, datatypes and wire
shapes, model, streaming, requested outputs, transport), replayed against the served
`ensemble` and `tensorrt_llm_bls` on every repository layout (the CPU one; the GPU wiring
with the CPU engine behind engine_relay; the GPU layout on the stand-in of TensorRT-LLM's C++
backend; the PyTorch-backend layout on the stand-in LLM API), and read the way the scripts
read them.

What the scripts do with an answer decides what passes: end_to_end_grpc_client.py decodes
`result.as_numpy('text_output')[0]`, places it by `batch_index[0][0]`, appends streamed
chunks, and with --check-outputs compares prompt + expected text exactly (greedy: no top_k /
top_p means greedy decoding at NVIDIA, so at ours).  What a layout's engine cannot do is
refused with INVALID_ARG naming the input and the engine, never answered as if it had been
done.
"""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from build_engines.repository import render_repository
from contract import names
from build_engines.trtllm.versions import default_target
from contract.sampling_fields import SamplingFeature
from contract.features import CPU_ENGINE, INPUT_FEATURES, PYTORCH_ENGINE, Feature, trtllm_engine, with_guided_decoding
from tests.integration.conftest import LAYOUTS
from contract.upstream.nvidia_clients import ClientCase, client_case, load_client_cases
from tests.integration.nvidia_replay import (
    StreamAnswer,
    http_generate,
    infer_inputs,
    replay_grpc_stream,
    request_arrays,
    texts_as_the_script_reads,
)

pytestmark = [pytest.mark.server, pytest.mark.slow]

E2E = "end_to_end_grpc_client.py"
MODELS = (names.ENSEMBLE, names.LLM_BLS)  # the script's --model-name choices


@pytest.fixture(scope="module", params=LAYOUTS)
def served(request):
    """The server of each repository layout (tests/integration/conftest.py LAYOUTS): the CPU
    engine in the ensemble, the GPU wiring in front of it, the GPU layout on the stand-in of
    TensorRT-LLM's C++ backend, and the PyTorch-backend layout on the stand-in LLM API."""
    return request.getfixturevalue(request.param)


def e2e(case: str) -> ClientCase:
    return client_case(E2E, case)


def replay(served, case: ClientCase, model: str | None = None, **values) -> StreamAnswer:
    request = case.requests[0]
    return replay_grpc_stream(served.settings.grpc_url, request, request_arrays(request, values), model)


def read(answer: StreamAnswer, case: ClientCase) -> list[str]:
    """The texts as the script reads them, after checking it could read them at all."""
    assert not answer.errors, [e.message() for e in answer.errors]
    assert answer.results, "no response"
    for result in answer.results:
        text = result.as_numpy("text_output")
        assert text is not None and text.shape == (1,), f"text_output must be 1-D [1] on the wire, got {text!r}"
        for name in ("batch_index", "sequence_index"):
            index = result.as_numpy(name)
            assert index is None or index.shape == (1, 1), f"{name}: the script reads [0][0], got shape {index.shape}"
    batch = case.inputs[0].shape[0]
    return texts_as_the_script_reads(answer, batch, case.streaming)


def prompt_of(case: ClientCase) -> str:
    return case.requests[0].input("text_input").value


def completion(case: ClientCase, text: str) -> str:
    """The generated part of a non-streamed, exclude_input_in_output=false answer: it echoes the prompt."""
    prompt = prompt_of(case)
    assert text.startswith(prompt), f"the prompt is not echoed: {text[:80]!r}"
    return text[len(prompt):]


@pytest.fixture(scope="module")
def reference(served) -> dict[str, str]:
    """The default case's completion per model: greedy (temperature 1.0 without top_k/top_p),
    so every other greedy case must agree with it."""
    case = e2e("default")
    return {model: completion(case, read(replay(served, case, model), case)[0]) for model in MODELS}


@pytest.mark.parametrize("model", MODELS)
def test_default_echoes_the_prompt_and_completes(served, reference, model):
    case = e2e("default")
    [text] = read(replay(served, case, model), case)
    assert completion(case, text).strip(), "empty completion"
    assert completion(case, text) == reference[model]


def test_bls_by_its_nvidia_name_answers_as_the_ensemble(served, reference):
    case = e2e("model_name_bls")
    assert case.model == names.LLM_BLS
    [text] = read(replay(served, case), case)
    assert completion(case, text) == reference[names.ENSEMBLE] == reference[names.LLM_BLS]


@pytest.mark.parametrize("model", MODELS)
def test_streaming_chunks_concatenate_to_the_completion(served, reference, model):
    case = e2e("streaming")
    answer = replay(served, case, model)
    [text] = read(answer, case)
    assert len(answer.results) > 3, "streamed, not one response"
    first = answer.results[0].as_numpy("text_output")[0].decode("utf-8")
    assert not first.startswith(prompt_of(case)), "a streamed answer does not echo the prompt"
    assert text == reference[model]


@pytest.mark.parametrize("model", MODELS)
def test_exclude_input_in_output_returns_the_completion_only(served, reference, model):
    case = e2e("exclude_input_in_output")
    [text] = read(replay(served, case, model), case)
    assert text == reference[model]


@pytest.mark.parametrize("model", MODELS)
def test_return_log_probs(served, reference, model):
    case = e2e("return_log_probs")
    answer = replay(served, case, model)
    [text] = read(answer, case)
    assert completion(case, text) == reference[model]
    [result] = answer.results
    cum, per_token = result.as_numpy("cum_log_probs"), result.as_numpy("output_log_probs")
    assert cum is not None and per_token is not None, "asked-for log-prob outputs missing"
    assert per_token.size > 0 and np.all(np.isfinite(per_token)) and np.all(per_token <= 0)
    assert np.any(per_token < 0), "log probs asked for but all zero"
    assert float(cum.reshape(-1)[0]) == pytest.approx(float(per_token.sum()), rel=1e-3, abs=1e-3)


@pytest.mark.parametrize("model", MODELS)
def test_stop_words_end_the_completion_at_the_first_match(served, reference, model):
    case = e2e("stop_words")
    [word] = case.requests[0].input("stop_words").value
    [text] = read(replay(served, case, model), case)
    stopped, full = completion(case, text), reference[model]
    assert word in full, "the reference completion must contain the stop word for this check to mean anything"
    # NVIDIA keeps the stop word's tokens, ours cuts before the matched text (docs/contract.md, the table
    # of differences): either way the answer is the greedy completion up to its first match.
    assert full.startswith(stopped)
    assert word not in stopped.removesuffix(word)
    assert len(stopped) <= full.index(word) + len(word)


@pytest.mark.parametrize("model", MODELS)
def test_batch_inputs_are_demultiplexed_by_batch_index(served, model):
    case = e2e("batch_inputs")
    prompts = case.requests[0].input("text_input").value
    answer = replay(served, case, model)
    texts = read(answer, case)
    assert sorted(int(r.as_numpy("batch_index")[0][0]) for r in answer.results) == list(range(len(prompts)))
    for prompt, text in zip(prompts, texts):
        assert text.startswith(prompt) and len(text) > len(prompt), (prompt, text)
    # each prompt alone gives the same text (greedy): nothing crossed between the batch's requests
    single = client_case(E2E, "default")
    for prompt, text in zip(prompts, texts):
        [alone] = read(replay(served, single, model, text_input=prompt, max_tokens=5), single)
        assert alone == text


@pytest.mark.parametrize("model", MODELS)
def test_check_outputs_with_greedy_settings_is_deterministic(served, model):
    case = e2e("check_outputs_greedy")
    assert "-o 20" in case.argv
    # The recording's argv says -o 20, which the script sends as max_tokens 20.
    first, second = (read(replay(served, case, model, max_tokens=20), case)[0] for _ in range(2))
    expected = completion(case, first)  # what --expected-outputs would hold
    assert second == prompt_of(case) + expected  # the script's check, exactly
    assert expected.strip()


# The engine behind each layout: what it honours and how its refusals name it.
# (Both TensorRT-LLM layouts are rendered with their xgrammar guided decoders by default.)
# (The stand-in layout is rendered for the configured image's TensorRT-LLM: its refusals name it.)
ENGINE_OF = {"server": CPU_ENGINE, "relay_server": CPU_ENGINE,
             "standin_server": with_guided_decoding(trtllm_engine(default_target().version)),
             "pytorch_server": with_guided_decoding(PYTORCH_ENGINE)}
STANDINS = {"standin_server"}  # the C++ backend's stand-in generates with the CPU engine
# what the CPU engine under it does as the C++ backend would
STANDIN_HONOURS = {Feature.GUIDED_DECODING, Feature.MULTIPLE_SEQUENCES}


def honoured(layout: str, ensemble_input: str) -> bool:
    feature = INPUT_FEATURES[ensemble_input].feature
    return feature in ENGINE_OF[layout].features and (layout not in STANDINS or feature in STANDIN_HONOURS)


def assert_refused(served_layout: str, message: str, ensemble_input: str, engine_input: str) -> None:
    """A feature the layout's engine lacks is refused with INVALID_ARG naming the input and the
    engine.  One the real engine has but its CPU stand-in cannot do fails that request with a
    message naming the input and the stand-in, never answered as if it had been done."""
    engine = ENGINE_OF[served_layout]
    if INPUT_FEATURES[ensemble_input].feature in engine.features:
        assert not honoured(served_layout, ensemble_input) and served_layout in STANDINS, \
            f"{engine.label} honours {ensemble_input}; it was refused: {message}"
        assert f"'{engine_input}'" in message and "stand-in" in message, message
    else:
        assert "[INVALID_ARG]" in message and f"'{ensemble_input}'" in message and engine.label in message, message


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("case_name", ("num_return_sequences", "return_perf_metrics"))
def test_features_are_honoured_or_refused_by_name(request, served, model, case_name):
    """`-n 2` and `--return-perf-metrics`: an engine that has the feature answers it (n
    sequences, each response placed by its sequence_index); one that lacks it refuses."""
    case = e2e(case_name)
    answer = replay(served, case, model)
    layout = request.node.callspec.params["served"]
    if not honoured(layout, case_name):
        assert not answer.results, "refused requests get no text"
        assert len(answer.errors) == 1
        assert_refused(layout, answer.errors[0].message(), case_name, case_name)
        return
    if layout == "pytorch_server" and case_name == "num_return_sequences":
        # the script's -n 2 is greedy, which the LLM API's SamplingParams refuses (row
        # sampling.validate.greedy_best_of): refused before the engine, naming the input
        assert not answer.results and len(answer.errors) == 1
        message = answer.errors[0].message()
        assert "[INVALID_ARG]" in message and "'num_return_sequences' 2 with greedy decoding" in message, message
        return
    assert not answer.errors, [e.message() for e in answer.errors]
    assert case_name == "num_return_sequences"  # the only one a non-stand-in layout here honours
    sequences = {int(r.as_numpy("sequence_index")[0][0]) for r in answer.results}
    assert sequences == set(range(int(case.requests[0].input("num_return_sequences").value))), sequences


# --- HTTP generate / generate_stream, as the docs' curl examples send them ----------------

CURL = {c.case: c for c in load_client_cases() if c.script == "curl (docs)"}
CURL_OK = ("readme_ensemble", "readme_bls", "llama_ids")


@pytest.mark.parametrize("name", CURL_OK)
def test_docs_curl_generate(served, name):
    case = CURL[name]
    answer = http_generate(served.settings.http_url, case.model, case.body)
    assert answer.status == 200, answer.body
    assert isinstance(answer.body["text_output"], str) and answer.body["text_output"].strip()
    assert answer.body["model_name"] == case.model


@pytest.mark.parametrize("model", MODELS)
def test_docs_curl_generate_stream(served, model):
    import json

    body = json.loads(CURL["readme_ensemble"].body)
    whole = http_generate(served.settings.http_url, model, body)
    streamed = http_generate(served.settings.http_url, model, {**body, "stream": True}, stream=True)
    assert whole.status == streamed.status == 200, (whole.body, streamed.body)
    assert len(streamed.body) > 1 and not any("error" in event for event in streamed.body), streamed.body
    assert "".join(event["text_output"] for event in streamed.body) == whole.body["text_output"]


def test_docs_generate_stream_with_a_parameters_object(served):
    """The docs' only generate_stream request puts the inputs in a "parameters" object; Triton
    makes tensors of the keys that name inputs (its image input and "id" left out: it targets
    the multimodal repository)."""
    import json

    body = json.loads(CURL["multimodal_generate_stream"].body)
    parameters = {**body["parameters"], "end_id": 2, "pad_id": 2}  # the docs' ids are Llama-3's
    answer = http_generate(served.settings.http_url, names.ENSEMBLE,
                           {"text_input": "What is machine learning?", "parameters": parameters}, stream=True)
    assert answer.status == 200 and answer.body and "error" not in answer.body[0], answer.body
    assert answer.body[-1]["num_output_tokens"] == parameters["max_tokens"]


def test_docs_bad_words_are_honoured_or_refused_by_name(request, served):
    """llama.md's bad_words ["intelligence", "model"]: the CPU engine has no bad words, and the
    PyTorch backend's sampler at 1.2.1 accepts and ignores them (sampling_support_1.2.1.json)."""
    case = CURL["llama_bad_stop_words"]
    answer = http_generate(served.settings.http_url, case.model, case.body)
    assert answer.status == 400, answer.body
    assert_refused(request.node.callspec.params["served"], answer.body["error"], "bad_words", "bad_words_list")


# Triton's HTTP generate makes a request parameter of every JSON key that is not an input, and an
# input tensor of every key that is: neither may be ignored.
UNKNOWN_KEYS = [
    ({"min_length": 4}, "'min_length'"),  # genai-perf's pre-1.0 name; declared by neither NVIDIA 1.x nor us
    ({"beam_width": 2}, "'beam_width'"),
    ({"return_perf_metrics": True}, "'return_perf_metrics'"),
    ({"no_such_key": 1}, "'no_such_key'"),
]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("extra,needle", UNKNOWN_KEYS, ids=[next(iter(k)) for k, _ in UNKNOWN_KEYS])
def test_http_generate_refuses_keys_it_cannot_honour(served, model, extra, needle):
    body = {"text_input": "What is machine learning?", "max_tokens": 8, **extra}
    answer = http_generate(served.settings.http_url, model, body)
    assert answer.status == 400, answer.body
    assert needle in answer.body["error"], answer.body


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("extra", [{"num_return_sequences": 2}, {"guided_decoding_guide_type": "json"}],
                         ids=["num_return_sequences", "guided_decoding_guide_type"])
def test_http_generate_stream_honours_or_refuses(request, served, model, extra):
    """NVIDIA's feature keys sent as JSON: answered where the layout's engine has the feature
    (several sequences need generate_stream, as at NVIDIA: `generate` takes exactly one
    response), refused with a 400 naming the input where it has not."""
    [(key, value)] = extra.items()
    layout = request.node.callspec.params["served"]
    # Seeded where the engine honours a seed (TorchSampler at 1.2.1 does not: refused there), and
    # room for a whole small object: an unseeded 24-token sample could be cut mid-string.
    seed = {"seed": 7} if SamplingFeature.SEED in ENGINE_OF[layout].features else {}
    body = {"text_input": "Describe a cat as JSON.", "max_tokens": 96, "temperature": 1.0, "top_k": 40, **seed, **extra}
    answer = http_generate(served.settings.http_url, model, body, stream=True)
    if not honoured(layout, key):
        errors = [e for e in answer.body if "error" in e] if answer.status == 200 else [answer.body]
        assert errors and f"'{key}'" in errors[0]["error"], answer.body
        return
    assert answer.status == 200 and not any("error" in e for e in answer.body), answer.body
    if key == "num_return_sequences":
        assert {e["sequence_index"] for e in answer.body} == {0, 1}
    else:
        import json

        json.loads("".join(e["text_output"] for e in answer.body))  # a JSON guide: the answer parses


# --- unary infer (a non-decoupled deployment, like NVIDIA's decoupled_mode=False) ----------

def test_unary_infer_on_the_decoupled_deployment_is_refused_by_triton(served):
    """What users of the default (decoupled) deployment see from plain InferenceServerClient.infer()."""
    inputs = infer_inputs(e2e("default").requests[0], request_arrays(e2e("default").requests[0]))
    with grpcclient.InferenceServerClient(served.settings.grpc_url) as client:
        for model in MODELS:
            with pytest.raises(InferenceServerException) as refused:
                client.infer(model, inputs)
            assert refused.value.status() == "StatusCode.UNIMPLEMENTED"
            assert "decoupled" in refused.value.message()


@pytest.fixture(scope="module")
def unary_server(default_engine, tmp_path_factory, serve):
    repository = tmp_path_factory.mktemp("unary") / "repository"
    render_repository(default_engine, repository, decoupled=False)
    return serve(repository)


@pytest.mark.parametrize("model", MODELS)
def test_unary_grpc_infer(unary_server, model):
    """The first thing most Triton users write: InferenceServerClient.infer() with the default case's tensors."""
    case = e2e("default")
    with grpcclient.InferenceServerClient(unary_server.settings.grpc_url) as client:
        inputs = infer_inputs(case.requests[0], request_arrays(case.requests[0]))
        result = client.infer(model, inputs, outputs=[grpcclient.InferRequestedOutput("text_output")])
    text = result.as_numpy("text_output")
    assert text.shape == (1,)
    assert completion(case, text[0].decode("utf-8")).strip()


@pytest.mark.parametrize("script_case", [("end_to_end_test.py", "default"), ("end_to_end_test.py", "test_bls")])
def test_unary_http_infer_as_end_to_end_test(unary_server, script_case):
    """tools/inflight_batcher_llm/end_to_end_test.py: unary HTTP infer with text_input, max_tokens,
    bad_words [''] and stop_words [''] on the ensemble and on tensorrt_llm_bls."""
    import tritonclient.http as httpclient

    script, name = script_case
    case = next(c for c in load_client_cases() if c.script.endswith(script) and c.case == name)
    # The script first chains preprocessing / tensorrt_llm / postprocessing by hand: NVIDIA's internal
    # models, whose contracts we do not keep.  Its ensemble (or BLS) request is the public one.
    request = next(r for r in case.requests if r.model in MODELS)
    values = {"text_input": "What is machine learning?", "max_tokens": 16}
    inputs = infer_inputs(request, request_arrays(request, values), httpclient)
    url = unary_server.settings.http_url.removeprefix("http://")
    with httpclient.InferenceServerClient(url) as client:
        result = client.infer(request.model, inputs,
                              outputs=[httpclient.InferRequestedOutput(n) for n in request.outputs or ()] or None)
    assert result.as_numpy("text_output")[0].decode("utf-8").strip()
