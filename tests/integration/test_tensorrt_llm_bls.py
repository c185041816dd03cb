"""tensorrt_llm_bls on a real Triton 2.51 server with the CPU engine: the ensemble's contract and
results, errors passed on, and - its reason to exist - a client's cancellation reaches the
engine (an ensemble's does not: Triton only cancels steps scheduled after the cancel)."""

from __future__ import annotations

import time

import pytest

from client import ChatMessage, InvalidRequestError, LlmClient, SamplingParams
from contract import names
from tests.integration.test_engine_relay import GREEDY, PROMPTS, assert_cancelled_quickly

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture(scope="module")
def bls_client(server):
    with LlmClient(server.settings.grpc_url, model=names.LLM_BLS) as c:
        yield c


def test_same_tokens_and_text_as_the_ensemble(bls_client, client):
    for prompt in PROMPTS:
        chunks = list(bls_client.stream(prompt, GREEDY))
        reference = client.generate(prompt, GREEDY)
        assert [t for c in chunks for t in c.token_ids] == list(reference.token_ids)
        assert "".join(c.text for c in chunks) == reference.text
        assert chunks[-1].finish_reason == reference.finish_reason
        assert chunks[-1].num_output_tokens == reference.completion_tokens


def test_non_streaming_and_stop_strings(bls_client, client):
    sampling = SamplingParams(max_tokens=48, temperature=0.0, stop=("Paris",))
    prompt = [ChatMessage("user", "What is the capital of France?")]
    result = bls_client.generate(prompt, sampling, stream=False)
    assert result.text == client.generate(prompt, sampling, stream=False).text
    assert "Paris" not in result.text


def test_errors_keep_their_code(bls_client):
    with pytest.raises(InvalidRequestError, match="'bad_words': asks for bad words"):  # the engine has none
        bls_client.generate("Hello", SamplingParams(max_tokens=8, bad_words=("cat",)))
    with pytest.raises(InvalidRequestError, match="max_input_len"):  # preprocessing's
        bls_client.generate("word " * 3000, SamplingParams(max_tokens=8))


def test_client_cancel_stops_the_engine(server):
    with LlmClient(server.settings.grpc_url, model=names.LLM_BLS) as c:
        stream = c.stream("Count from one to ten thousand in words.",
                          SamplingParams(max_tokens=1500, min_tokens=1400, temperature=0.0))
        for _ in range(3):
            next(stream)
        cancelled_at = time.monotonic()
        stream.close()
    assert_cancelled_quickly(server, names.LLM_BLS, cancelled_at, limit_s=10)  # all 1500 tokens: ~15 s
