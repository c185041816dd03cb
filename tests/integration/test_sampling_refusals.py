"""Issue 33 item 3 on a real Triton server: the PyTorch-backend layout (TensorRT-LLM 1.2.1,
TorchSampler) refuses the sampling fields its sampler accepts and ignores (penalties, a seed
when sampling, bad words; contract/upstream/data/sampling_support_1.2.1.json), with INVALID_ARG
naming the field and the version, through the ensemble, tensorrt_llm_bls and the OpenAI front;
the CPU layout, whose engine honours them, answers the same requests.

Issue 46 item 4: a PyTorch layout built with --sampling-fields for them runs TRTLLMSampler (the
plan's choice), which applies them: it answers the same requests, and the penalty changes the
answer on the stand-in (run here: the penalty_server tests, 2026-12-02)."""

from __future__ import annotations

import openai
import pytest

from client import ChatMessage, LlmClient, SamplingParams
from client.errors import InvalidRequestError
from contract import names
from tests.integration.openai_front_process import MODEL, running_front

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPT = [ChatMessage("user", "What is the capital of France?")]
SAMPLED = dict(max_tokens=8, temperature=0.8, top_k=40)
IGNORED = [
    (SamplingParams(max_tokens=8, temperature=0.0, repetition_penalty=1.3), "repetition_penalty"),
    (SamplingParams(max_tokens=8, temperature=0.0, presence_penalty=0.5), "presence_penalty"),
    (SamplingParams(max_tokens=8, temperature=0.0, frequency_penalty=0.5), "frequency_penalty"),
    (SamplingParams(seed=7, **SAMPLED), "seed"),
    (SamplingParams(max_tokens=8, temperature=0.0, bad_words=(" Paris",)), "bad_words"),
    (SamplingParams(max_tokens=8, min_p=0.1, **{k: v for k, v in SAMPLED.items() if k != "max_tokens"}), "min_p"),
]


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
@pytest.mark.parametrize("params,field", IGNORED, ids=[f for _, f in IGNORED])
def test_pytorch_layout_refuses_what_torchsampler_ignores(pytorch_server, model, params, field):
    with LlmClient(pytorch_server.settings.grpc_url, model=model) as client:
        with pytest.raises(InvalidRequestError, match=f"'{field}'") as e:
            client.generate(PROMPT, params)
    assert "1.2.1" in str(e.value) and "TorchSampler" in str(e.value)


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
def test_pytorch_layout_takes_neutral_values_and_greedy_seeds(pytorch_server, model):
    neutral = SamplingParams(max_tokens=8, temperature=0.0, repetition_penalty=1.0, presence_penalty=0.0,
                             frequency_penalty=0.0, seed=7)  # greedy: the seed changes nothing
    with LlmClient(pytorch_server.settings.grpc_url, model=model) as client:
        assert client.generate(PROMPT, neutral).token_ids
        assert client.generate(PROMPT, SamplingParams(**SAMPLED)).token_ids  # sampled, no seed sent


def test_the_cpu_layout_honours_the_same_fields(client):
    params = SamplingParams(seed=7, repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.5, min_p=0.1,
                            **SAMPLED)
    first, again = client.generate(PROMPT, params), client.generate(PROMPT, params)
    assert first.token_ids == again.token_ids  # seeded


def test_min_p_cuts_the_cpu_layouts_sampling_to_the_most_probable_tokens(client):
    """OpenVINO GenAI's GenerationConfig.min_p (2026.4.1): at min_p 1 only the most probable token is
    left (top-k 1 on the CPU engine), so a hot sample is the greedy answer whatever its seed."""
    greedy = client.generate(PROMPT, SamplingParams(max_tokens=8, temperature=0.0)).token_ids
    hot = dict(max_tokens=8, temperature=5.0, top_k=0, top_p=1.0)
    assert all(client.generate(PROMPT, SamplingParams(seed=s, min_p=1.0, **hot)).token_ids == greedy for s in (1, 2))


def test_openai_front_answers_400_naming_the_field_and_version(pytorch_server, default_engine, tmp_path):
    with running_front(pytorch_server.settings.grpc_url, tmp_path, "--tokenizer", str(default_engine)) as base:
        oai = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        for extra, field in (({"frequency_penalty": 0.5}, "frequency_penalty"),
                             ({"presence_penalty": 0.5}, "presence_penalty"),
                             ({"seed": 7, "temperature": 0.9, "top_p": 0.9}, "seed"),
                             ({"extra_body": {"min_p": 0.1}}, "min_p")):
            with pytest.raises(openai.BadRequestError) as e:
                oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, **extra)
            assert field in str(e.value) and "1.2.1" in str(e.value), e.value
        ok = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0.0, seed=7)
        assert ok.choices[0].message.content is not None


# --- issue 46 item 4: a deployment built for the fields gets the sampler that applies them ---------
@pytest.fixture(scope="module")
def penalty_server(default_checkpoint, default_engine, tmp_path_factory, serve):
    """The PyTorch-backend layout built with --sampling-fields for the penalties and the seed: the plan
    picks TRTLLMSampler (LLM(sampler_type='TRTLLMSampler')), which the stand-in applies them with."""
    from build_engines.cli_options import make_spec
    from build_engines.pytorch.build import build_pytorch_engine
    from build_engines.repository import render_repository
    from standins.links import use_standin_llmapi

    spec = make_spec(default_checkpoint, backend="tensorrt_llm_pytorch", precision=None, max_batch_size=8,
                     max_input_len=1536, max_seq_len=2048, max_num_tokens=512, default_max_tokens=64,
                     kv_cache_size_gb=0, prefix_caching=False, inference_threads=0, triton_image="26.07",
                     kv_cache_reuse=False, detect=lambda: None,
                     sampling_fields="repetition_penalty,presence_penalty,frequency_penalty,seed")
    assert spec.pytorch.sampler_plan.sampler == "TRTLLMSampler"
    engine_dir = tmp_path_factory.mktemp("penalty") / "engine"
    build_pytorch_engine(spec, engine_dir)
    repository = engine_dir.parent / "repository"
    render_repository(engine_dir, repository)
    return serve(repository, use_standin_llmapi(repository, default_engine))


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
def test_a_deployment_built_for_penalties_answers_them_and_they_change_the_answer(penalty_server, model):
    """On main this layout could not be built, and the 1.2.1 PyTorch layout answered INVALID_ARG (400)."""
    plain = SamplingParams(max_tokens=32, temperature=0.0)
    penalized = SamplingParams(max_tokens=32, temperature=0.0, repetition_penalty=2.0, presence_penalty=1.0)
    with LlmClient(penalty_server.settings.grpc_url, model=model) as client:
        first, second = client.generate(PROMPT, plain), client.generate(PROMPT, penalized)
        assert first.token_ids and second.token_ids and first.token_ids != second.token_ids
        seeded = SamplingParams(seed=7, **SAMPLED)
        assert client.generate(PROMPT, seeded).token_ids == client.generate(PROMPT, seeded).token_ids


def test_the_penalty_deployment_still_refuses_what_its_sampler_cannot_do(penalty_server):
    """TRTLLMSampler returns the sampled token's log prob only: top_logprobs stays refused, by name."""
    with LlmClient(penalty_server.settings.grpc_url, model=names.ENSEMBLE) as client:
        with pytest.raises(InvalidRequestError, match="top_logprobs"):
            client.generate(PROMPT, SamplingParams(max_tokens=4, temperature=0.0, return_log_probs=True,
                                                   top_logprobs=3))


def test_the_openai_front_answers_penalties_on_the_penalty_deployment(penalty_server, default_engine, tmp_path):
    """The request that is a 400 on the default 1.2.1 PyTorch layout (test above) is answered here."""
    with running_front(penalty_server.settings.grpc_url, tmp_path, "--tokenizer", str(default_engine)) as base:
        oai = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        for extra in ({"frequency_penalty": 0.5}, {"presence_penalty": 0.5}, {"seed": 7, "temperature": 0.9}):
            answer = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, **extra)
            assert answer.choices[0].message.content, extra
