"""A deployment with prompt-lookup speculative decoding (`--prompt-lookup`): streaming, stop
strings, log probs and cancellation work through the ensemble as without it; n > 1, which
OpenVINO GenAI refuses with assistant generation, is refused before the engine, naming it.
Greedy answers are NOT asserted equal to plain decoding: measured, they are not
(build_engines/spec.py, OpenVinoOptions.prompt_lookup)."""

from __future__ import annotations

import time

import pytest
from build_engines.render import copy_repository
from contract import names
from client import ChatMessage, InvalidRequestError, LlmClient, SamplingParams

pytestmark = [pytest.mark.server, pytest.mark.slow]

PASSAGE = ("The lighthouse keeper climbed the spiral stairs every evening at six, lit the great lamp, "
           "wrote the weather in the log book, and watched the ships pass the rocks until dawn.")
PROMPT = [ChatMessage("user", f"Repeat this text exactly, twice:\n\n{PASSAGE}")]


@pytest.fixture(scope="module")
def lookup_server(repository, serve, tmp_path_factory):
    dest = tmp_path_factory.mktemp("prompt_lookup") / "repository"
    return serve(copy_repository(repository, dest, names.OPENVINO_ENGINE, {"prompt_lookup": "true"}))


@pytest.fixture(scope="module")
def client(lookup_server):
    with LlmClient(lookup_server.settings.grpc_url) as c:
        yield c


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


def test_n_samples_are_refused_naming_the_engine(client):
    with pytest.raises(InvalidRequestError, match=r"'num_return_sequences'.*prompt-lookup decoding"):
        client.generate_n("Hi", SamplingParams(max_tokens=4, n=2, temperature=1.0))


def test_a_cancelled_stream_frees_the_engine(client, lookup_server):
    from serving import prometheus

    from contract.metrics import REQUESTS_RUNNING

    stream = client.stream(PROMPT, SamplingParams(max_tokens=400, min_tokens=400, temperature=0.0))
    next(stream)
    stream.close()  # cancels the request
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if prometheus.value(prometheus.scrape(lookup_server.settings.metrics_url), REQUESTS_RUNNING.name) == 0:
            break
        time.sleep(0.25)
    assert prometheus.value(prometheus.scrape(lookup_server.settings.metrics_url), REQUESTS_RUNNING.name) == 0
    assert client.generate(PROMPT, SamplingParams(max_tokens=4, temperature=0.0)).completion_tokens == 4
