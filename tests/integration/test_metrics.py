"""Our engine metrics appear on Triton's /metrics and move under load."""

from __future__ import annotations

import asyncio
import time

import pytest

from client import AsyncLlmClient, ChatMessage, SamplingParams
from contract import metrics as m
from serving.prometheus import value

pytestmark = pytest.mark.server


def snapshot(metrics):
    samples = metrics()
    names = [f"{m.TIME_TO_FIRST_TOKEN.name}_count", f"{m.TIME_TO_FIRST_TOKEN.name}_sum",
             f"{m.INTER_TOKEN_LATENCY.name}_count", f"{m.QUEUE_TIME.name}_count", m.GENERATED_TOKENS.name]
    return {n: value(samples, n) for n in names} | {"finished": value(samples, m.REQUESTS_FINISHED.name, outcome="finished")}


def test_histograms_move_under_load(server, metrics):
    time.sleep(0.6)  # let earlier tests' events be published
    before = snapshot(metrics)

    async def load():
        async with AsyncLlmClient(server.settings.grpc_url) as c:
            await asyncio.gather(*(c.generate([ChatMessage("user", f"Count to {i}.")], SamplingParams(max_tokens=16, min_tokens=16))
                                   for i in range(4)))

    asyncio.run(load())
    time.sleep(0.6)  # published every 0.25 s
    after = snapshot(metrics)
    assert after[f"{m.TIME_TO_FIRST_TOKEN.name}_count"] - before[f"{m.TIME_TO_FIRST_TOKEN.name}_count"] == 4
    assert after[f"{m.TIME_TO_FIRST_TOKEN.name}_sum"] > before[f"{m.TIME_TO_FIRST_TOKEN.name}_sum"]
    assert after[f"{m.QUEUE_TIME.name}_count"] - before[f"{m.QUEUE_TIME.name}_count"] == 4
    assert after[f"{m.INTER_TOKEN_LATENCY.name}_count"] - before[f"{m.INTER_TOKEN_LATENCY.name}_count"] >= 4 * 15 / 4
    assert after[m.GENERATED_TOKENS.name] - before[m.GENERATED_TOKENS.name] == 4 * 16
    assert after["finished"] - before["finished"] == 4
    buckets = [s for s in metrics() if s.name == f"{m.TIME_TO_FIRST_TOKEN.name}_bucket"]
    assert {dict(s.labels)["le"] for s in buckets} >= {"0.1", "1", "+Inf"}
