"""AIPerf 0.13.0 (bench/aiperf.py) against a live server.

In `make test`: the front's streaming chat as AIPerf's docs run it for a vLLM-style OpenAI server
(`--extra-inputs ignore_eos:true --extra-inputs min_tokens:N`, counted with the server's usage):
concurrency 2, 4 requests of 32 prompt tokens and 16 output tokens, each of which must be exactly 16
tokens long, without an error, with non-zero TTFT and ITL; its row goes in the session's PASS/FAIL
table (compat_table.py).  About 30 s, most of it AIPerf's services starting.

Opt-in (KIT_TEST_AIPERF=1): the same short run through each of `make bench`'s HTTP targets (the
chat and Triton's HTTP generate_stream of the ensemble and the BLS through AIPerf's template
endpoint, whose output lengths AIPerf counts by encoding the text again).  The first run makes
build/aiperf from requirements/aiperf.lock (minutes; CI makes it in the background:
bench/environments.py TEST_ENVIRONMENTS)."""

from __future__ import annotations

import json
import os

import pytest

from bench import aiperf
from bench.environments import aiperf_venv
from contract import names
from tests.integration.compat_table import ASKED_LENGTH, COMPLETES, LATENCIES
from tests.integration.openai_front_process import MODEL

pytestmark = [pytest.mark.server, pytest.mark.slow]
OPT_IN = pytest.mark.skipif(not os.environ.get("KIT_TEST_AIPERF"), reason="opt-in: KIT_TEST_AIPERF=1 (every HTTP "
                            "target of make bench)")

SWEEP = aiperf.Sweep(input_tokens=32, output_tokens=16, requests_per_stream=2, min_requests=4)


def _profiling(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("metadata", {}).get("benchmark_phase") == "profiling"]


def _metric(record: dict, name: str) -> float | None:
    value = record.get("metrics", {}).get(name)
    return None if value is None else value["value"]


def test_aiperf_chat_with_ignore_eos_and_min_tokens_gets_every_answer_at_the_asked_length(
        agent_front, default_engine, tmp_path, compat_table):
    target = aiperf.Target(aiperf.Kind.OPENAI_CHAT, agent_front, MODEL)
    row = compat_table.row(aiperf.GENERATOR, "chat, streaming, ignore_eos + min_tokens")
    cmd = aiperf.command(aiperf_venv(), target, SWEEP, 2, default_engine, tmp_path)
    assert "ignore_eos:true" in cmd and f"min_tokens:{SWEEP.output_tokens}" in cmd
    try:
        result = aiperf.run(aiperf_venv(), target, SWEEP, 2, default_engine, tmp_path)
    except RuntimeError as failed:  # a failed request, or none completed: the tool's own verdict
        log = (tmp_path / "aiperf.log").read_text()[-3000:] if (tmp_path / "aiperf.log").is_file() else ""
        row.check(COMPLETES, False, str(failed))
        raise AssertionError(f"{row.failures()}\n{log}") from failed
    records = _profiling(aiperf.read_records(tmp_path / aiperf.RECORDS))
    lengths = [_metric(r, "output_sequence_length") for r in records]
    ttfts = [_metric(r, "time_to_first_token") for r in records]
    itls = [_metric(r, "inter_token_latency") for r in records]
    print(f"\n{aiperf.GENERATOR} chat c2: {result.requests} requests, output lengths {lengths}, "
          f"TTFT p50 {result.ttft_s['p50'] * 1000:.0f} ms, ITL p50 {result.itl_s['p50'] * 1000:.1f} ms")
    row.check(COMPLETES, result.requests == len(records) == SWEEP.request_count(2),
              f"{result.requests} requests, {len(records)} records")
    row.check(ASKED_LENGTH, lengths == [SWEEP.output_tokens] * len(records), f"output lengths {lengths}")
    row.check(LATENCIES, all(t and t > 0 for t in ttfts) and all(i and i > 0 for i in itls),
              f"TTFT {ttfts}, ITL {itls}")
    row.assert_passed()


@OPT_IN
@pytest.mark.parametrize("which", [names.ENSEMBLE, names.LLM_BLS])
def test_aiperf_generate_stream_answers_every_request_with_the_asked_length(server, default_engine, tmp_path, which):
    target = aiperf.Target(aiperf.Kind.TRITON_GENERATE, server.settings.http_url, which)
    result = aiperf.run(aiperf_venv(), target, SWEEP, 2, default_engine, tmp_path)
    assert result.requests == SWEEP.request_count(2) == len(result.ttfts_s)
    # AIPerf counts tokens by encoding the text it received again: a token or so off now and then
    summary = json.loads((tmp_path / aiperf.SUMMARY).read_text())
    lengths = summary["output_sequence_length"]
    assert SWEEP.output_tokens - 1 <= lengths["min"] <= lengths["max"] <= SWEEP.output_tokens + 1
