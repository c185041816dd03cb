"""Cancelling a stream frees its engine slot at once; many cancellations leak nothing.

The client addresses only the model it called (`ensemble` or `tensorrt_llm_bls`): it cancels its gRPC
stream and sends `stop` under the same request id to that model, which every step forwards
to the engine (contract/tensors.py, STOP)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from serving import prometheus
from serving.prometheus import value
from client import ChatMessage, LlmClient, RequestTimeout, SamplingParams
from contract import metrics as m
from contract import names
from tests.integration.conftest import LAYOUTS, STREAM_TTL_S

pytestmark = pytest.mark.server
LONG = SamplingParams(max_tokens=400, min_tokens=400, temperature=0.0)
PROMPT = [ChatMessage("user", "Write a very long story about the history of bread.")]


def wait_for(predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def running(metrics):
    return value(metrics(), m.REQUESTS_RUNNING.name)


def settled(metrics, name, **labels):
    """The counter's value once earlier tests' events are published (every 0.25 s)."""
    assert wait_for(lambda: running(metrics) == 0, 5.0)
    previous = None
    while True:
        current = value(metrics(), name, **labels)
        if current == previous:
            return current
        previous = current
        time.sleep(0.6)


# top_logprobs: the request's IR scoring session (engine_step/alternatives.py) ends with it
@pytest.mark.parametrize("sampling", [LONG, dataclasses.replace(LONG, top_logprobs=5)], ids=["plain", "top_logprobs"])
def test_cancel_mid_stream_frees_the_engine_slot(client, metrics, sampling):
    before = settled(metrics, m.REQUESTS_FINISHED.name, outcome="cancelled")
    stream = client.stream(PROMPT, sampling)
    for _ in range(3):
        next(stream)
    assert wait_for(lambda: running(metrics) == 1, 1.0)
    stream.close()  # the client goes away mid-answer
    t0 = time.monotonic()
    assert wait_for(lambda: running(metrics) == 0, 2.0)
    freed_after = time.monotonic() - t0
    assert value(metrics(), m.REQUESTS_FINISHED.name, outcome="cancelled") == before + 1
    # The gauge is published every 0.25 s; the slot itself is dropped before the next step.
    assert freed_after < 1.0


def test_timeout_cancels_on_the_server(client, metrics):
    with pytest.raises(RequestTimeout):
        client.generate(PROMPT, LONG, timeout_s=0.5)
    assert wait_for(lambda: running(metrics) == 0, 2.0)


def test_twenty_cancellations_in_a_row_leave_no_state(client, metrics):
    before = settled(metrics, m.REQUESTS_FINISHED.name, outcome="cancelled")
    generated_before = value(metrics(), m.GENERATED_TOKENS.name)
    for _ in range(20):
        stream = client.stream(PROMPT, LONG)
        next(stream)
        next(stream)
        stream.close()
    assert wait_for(lambda: running(metrics) == 0 and value(metrics(), m.REQUESTS_WAITING.name) == 0, 3.0)
    assert wait_for(lambda: value(metrics(), m.REQUESTS_FINISHED.name, outcome="cancelled") == before + 20, 2.0)
    assert value(metrics(), m.GENERATED_TOKENS.name) - generated_before < 20 * 50  # nobody ran on to 400 tokens
    # Postprocessing never sees the end of a cancelled stream; its state expires.
    assert wait_for(lambda: value(metrics(), m.POSTPROCESSING_STREAMS.name) == 0, STREAM_TTL_S + 2)
    result = client.generate([ChatMessage("user", "What is the capital of France?")], SamplingParams(max_tokens=10, temperature=0))
    assert "Paris" in result.text


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_engine_stops_generating_within_a_second_of_the_client_leaving(layout, model, request):
    assert_engine_stops_within_a_second(request.getfixturevalue(layout), model)


def assert_engine_stops_within_a_second(server, model):
    """The client leaves after 3 chunks; the engine's generated-token counter stops growing."""
    scrape = lambda: prometheus.scrape(server.settings.metrics_url)  # noqa: E731
    generated = lambda: value(scrape(), m.GENERATED_TOKENS.name)  # noqa: E731
    assert wait_for(lambda: value(scrape(), m.REQUESTS_RUNNING.name) == 0, 5.0)
    with LlmClient(server.settings.grpc_url, model=model) as client:
        stream = client.stream(PROMPT, LONG)
        for _ in range(3):
            next(stream)
        stream.close()  # the client goes away mid-answer
        left = time.monotonic()
        assert wait_for(lambda: value(scrape(), m.REQUESTS_RUNNING.name) == 0, 1.0), "the engine slot was not freed"
        time.sleep(max(0.0, left + 1.0 - time.monotonic()))
        at_one_second = generated()
        time.sleep(1.0)  # the counter is published every 0.25 s
        assert generated() == at_one_second, "the engine still generates for a client that left"
