"""Issue 33 item 3 on a real Triton server: the PyTorch-backend layout (TensorRT-LLM 1.2.1,
TorchSampler) refuses the sampling fields its sampler accepts and ignores (penalties, a seed
when sampling, bad words; contract/upstream/data/sampling_support_1.2.1.json), with INVALID_ARG
naming the field and the version, through the ensemble, tensorrt_llm_bls and the OpenAI front;
the CPU layout, whose engine honours them, answers the same requests.

Written without being run here (the integration suite is run by the project's CI)."""

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
    params = SamplingParams(seed=7, repetition_penalty=1.3, presence_penalty=0.5, frequency_penalty=0.5, **SAMPLED)
    first, again = client.generate(PROMPT, params), client.generate(PROMPT, params)
    assert first.token_ids == again.token_ids  # seeded


def test_openai_front_answers_400_naming_the_field_and_version(pytorch_server, default_engine, tmp_path):
    with running_front(pytorch_server.settings.grpc_url, tmp_path, "--tokenizer", str(default_engine)) as base:
        oai = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        messages = [{"role": "user", "content": "What is the capital of France?"}]
        for extra, field in (({"frequency_penalty": 0.5}, "frequency_penalty"),
                             ({"presence_penalty": 0.5}, "presence_penalty"),
                             ({"seed": 7, "temperature": 0.9, "top_p": 0.9}, "seed")):
            with pytest.raises(openai.BadRequestError) as e:
                oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, **extra)
            assert field in str(e.value) and "1.2.1" in str(e.value), e.value
        ok = oai.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0.0, seed=7)
        assert ok.choices[0].message.content is not None
