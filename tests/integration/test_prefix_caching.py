"""Prefix caching is on by default and exact: multi-turn chats that share a long system prompt,
served with the KV blocks of earlier turns reused, give the same greedy tokens as the same engine
prefilling every prompt from scratch (OpenVINO GenAI driven directly, prefix caching off)."""

from __future__ import annotations

import pytest

from client import ChatMessage, SamplingParams
from tests.integration.direct_engine import chat_ids, direct_pipeline, greedy, served_parameters

pytestmark = [pytest.mark.server, pytest.mark.slow]

SYSTEM = "You are a careful assistant for a travel company. Answer briefly and name concrete places. " * 12
CHATS = (("Plan a morning in Paris.", "Make it cheaper.", "Now add a museum."),
         ("Explain how tides work.", "What does the moon do?", "Give one example."))
MAX_TOKENS = 32


@pytest.fixture(scope="module")
def served_turns(client, default_checkpoint):
    """(prompt ids, greedy answer ids) of every turn, served one request at a time, each turn
    carrying the whole conversation so far: from turn 2 on its prefix is in the cache."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_checkpoint))
    turns = []
    for chat in CHATS:
        messages = [ChatMessage("system", SYSTEM)]
        for question in chat:
            messages.append(ChatMessage("user", question))
            result = client.generate(messages, SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0))
            turns.append((chat_ids(tok, messages), list(result.token_ids)))
            messages.append(ChatMessage("assistant", result.text))
    return turns


def test_the_default_deployment_caches_prefixes(repository):
    from build_engines.render import read_config

    config = read_config(repository / "openvino_llm" / "config.pbtxt")
    assert config.parameters["enable_prefix_caching"].string_value == "true"


def test_multi_turn_answers_equal_a_fresh_prefill(served_turns, default_engine, repository):
    pipe = direct_pipeline(default_engine, served_parameters(repository))
    assert len({len(ids) for ids, _ in served_turns}) == len(served_turns)  # every turn is a longer prompt
    for n, (ids, served) in enumerate(served_turns):
        assert served == greedy(pipe, n, ids, MAX_TOKENS), f"turn {n} ({len(ids)} prompt tokens)"


def test_the_hit_rate_counts_the_shared_prefixes(served_turns, metrics):
    """Every turn after a conversation's first, and every first turn after the first chat, starts
    with the long system prompt already seen (the estimate publishes after ~1 s)."""
    import time

    from contract.metrics import PREFIX_CACHE_HITS, PREFIX_CACHE_QUERIES
    from serving import prometheus

    system_blocks = (len(served_turns[0][0]) - 32) // 32  # the system prompt fills most of the first prompt
    deadline = time.monotonic() + 10
    while True:
        samples = metrics()
        queries = prometheus.value(samples, PREFIX_CACHE_QUERIES.name)
        hits = prometheus.value(samples, PREFIX_CACHE_HITS.name)
        if queries >= sum(len(ids) // 32 * 32 for ids, _ in served_turns) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert queries >= sum(len(ids) // 32 * 32 for ids, _ in served_turns)
    assert (len(served_turns) - 1) * system_blocks * 32 <= hits < queries
