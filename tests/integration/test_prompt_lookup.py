"""A deployment with prompt-lookup speculative decoding (`--prompt-lookup`): greedy answers equal
plain decoding's (with the default unquantized KV cache), one at a time and batched; streaming,
stop strings, log probs and cancellation work through the ensemble as without it; n > 1, which
OpenVINO GenAI refuses with assistant generation, and min_tokens are refused, naming them."""

from __future__ import annotations

import time

import pytest
from build_engines.render import copy_repository
from contract import names
from client import AsyncLlmClient, ChatMessage, InvalidRequestError, LlmClient, SamplingParams
from tests.integration.direct_engine import chat_ids, direct_pipeline, greedy, served_parameters

pytestmark = [pytest.mark.server, pytest.mark.slow]

# Greedy, the default model writes all 400 tokens of this one (no min_tokens: refused here).
LONG_ANSWER = [ChatMessage("user", "Write a very long story about a lighthouse keeper, at least 1000 words.")]
PASSAGE = ("The lighthouse keeper climbed the spiral stairs every evening at six, lit the great lamp, "
           "wrote the weather in the log book, and watched the ships pass the rocks until dawn.")
PROMPT = [ChatMessage("user", f"Repeat this text exactly, twice:\n\n{PASSAGE}")]
# Input-grounded and open prompts, up to 128 greedy tokens; with the u8 KV cache the second's
# answer changed with prompt lookup, alone and batched (build_engines/openvino/precision.py).
EXACTNESS_PROMPTS = (
    PROMPT,
    [ChatMessage("user", "Explain in detail how a refrigerator works.")],
    LONG_ANSWER,
    [ChatMessage("user", "Write a long poem about the sea.")],
)


@pytest.fixture(scope="module")
def lookup_server(repository, serve, tmp_path_factory):
    dest = tmp_path_factory.mktemp("prompt_lookup") / "repository"
    return serve(copy_repository(repository, dest, names.OPENVINO_ENGINE, {"prompt_lookup": "true"}))


@pytest.fixture(scope="module")
def client(lookup_server):
    with LlmClient(lookup_server.settings.grpc_url) as c:
        yield c


def test_greedy_answers_equal_plain_decoding_alone_and_batched(lookup_server, default_engine, default_checkpoint):
    """Token for token against the same IR and numerics decoding plainly (OpenVINO GenAI driven
    directly), up to 128 tokens each: served one at a time, then all at once."""
    import asyncio

    from transformers import AutoTokenizer

    sampling = SamplingParams(max_tokens=128, temperature=0.0)

    async def answers(concurrent: bool):
        async with AsyncLlmClient(lookup_server.settings.grpc_url) as c:
            if concurrent:
                return await asyncio.gather(*(c.generate(m, sampling) for m in EXACTNESS_PROMPTS))
            return [await c.generate(m, sampling) for m in EXACTNESS_PROMPTS]

    alone, together = asyncio.run(answers(False)), asyncio.run(answers(True))
    # prompt lookup ran: accepted drafts arrive several tokens to a response
    assert sum(len(r.chunk_times_s) for r in alone) < sum(r.completion_tokens for r in alone)
    tok = AutoTokenizer.from_pretrained(str(default_checkpoint))
    pipe = direct_pipeline(default_engine, served_parameters(lookup_server.settings.repository))
    for n, (messages, one, batched) in enumerate(zip(EXACTNESS_PROMPTS, alone, together)):
        plain = greedy(pipe, n, chat_ids(tok, messages), 128)
        assert list(one.token_ids) == plain, f"prompt {n}, alone"
        assert list(batched.token_ids) == plain, f"prompt {n}, batched"


def test_streamed_text_is_the_whole_answer(client):
    sampling = SamplingParams(max_tokens=64, temperature=0.0)
    whole = client.generate(PROMPT, sampling)
    streamed = "".join(chunk.text for chunk in client.stream(PROMPT, sampling))
    assert streamed == whole.text and whole.completion_tokens > 8
    # with draft tokens accepted several at a time, chunks may carry more than one token
    assert "lighthouse" in whole.text.lower()


def test_stop_strings_and_log_probs(client):
    result = client.generate(PROMPT, SamplingParams(max_tokens=64, temperature=0.0, stop=("stairs",),
                                                    return_log_probs=True))
    assert "stairs" not in result.text and result.finish_reason == "stop"
    assert len(result.log_probs) == len(result.token_ids) and all(lp <= 0 for lp in result.log_probs)


def test_min_tokens_is_refused_naming_why(client):
    """OpenVINO GenAI lets EOS through before min_new_tokens once drafts are rejected
    (openvino_backend.assisted_generation_problems)."""
    with pytest.raises(InvalidRequestError, match=r"'min_tokens' \(8\).*prompt-lookup decoding"):
        client.generate(PROMPT, SamplingParams(max_tokens=16, min_tokens=8, temperature=0.0))
    assert client.generate(PROMPT, SamplingParams(max_tokens=4, temperature=0.0)).completion_tokens == 4


def test_n_samples_are_refused_naming_the_engine(client):
    with pytest.raises(InvalidRequestError, match=r"'num_return_sequences'.*prompt-lookup decoding"):
        client.generate_n("Hi", SamplingParams(max_tokens=4, n=2, temperature=1.0))


def test_a_cancelled_stream_frees_the_engine(client, lookup_server):
    from serving import prometheus

    from contract.metrics import REQUESTS_RUNNING

    stream = client.stream(LONG_ANSWER, SamplingParams(max_tokens=400, temperature=0.0))  # min_tokens is refused
    next(stream)
    stream.close()  # cancels the request
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if prometheus.value(prometheus.scrape(lookup_server.settings.metrics_url), REQUESTS_RUNNING.name) == 0:
            break
        time.sleep(0.25)
    assert prometheus.value(prometheus.scrape(lookup_server.settings.metrics_url), REQUESTS_RUNNING.name) == 0
    assert client.generate(PROMPT, SamplingParams(max_tokens=4, temperature=0.0)).completion_tokens == 4
