"""AIPerf 0.13.0 (bench/aiperf.py) against a live server: the front's streaming chat and Triton's
HTTP generate_stream of the ensemble and the BLS through AIPerf's template endpoint, short runs
(concurrency 2, 4 requests, 32-token prompts, 16 output tokens) that must answer every request
with 16 tokens.  Opt-in (KIT_TEST_AIPERF=1): the first run makes build/aiperf from
requirements/aiperf.lock (minutes), and every run starts AIPerf's services (~20 s)."""

from __future__ import annotations

import json
import os

import pytest

from bench import aiperf
from bench.environments import aiperf_venv
from contract import names
from tests.integration.openai_front_process import MODEL

pytestmark = [pytest.mark.server, pytest.mark.slow,
              pytest.mark.skipif(not os.environ.get("KIT_TEST_AIPERF"), reason="opt-in: KIT_TEST_AIPERF=1 (AIPerf's own "
                                 "environment and a live run)")]

SWEEP = aiperf.Sweep(input_tokens=32, output_tokens=16, requests_per_stream=2, min_requests=4)


@pytest.mark.parametrize("which", ["chat", names.ENSEMBLE, names.LLM_BLS])
def test_aiperf_answers_every_request_with_the_asked_length(server, agent_front, default_engine, tmp_path, which):
    target = (aiperf.Target(aiperf.Kind.OPENAI_CHAT, agent_front, MODEL) if which == "chat"
              else aiperf.Target(aiperf.Kind.TRITON_GENERATE, server.settings.http_url, which))
    result = aiperf.run(aiperf_venv(), target, SWEEP, 2, default_engine, tmp_path)
    assert result.requests == SWEEP.request_count(2) == len(result.ttfts_s)
    # AIPerf counts tokens by encoding the text it received again: a token or so off now and then
    summary = json.loads((tmp_path / aiperf.SUMMARY).read_text())
    lengths = summary["output_sequence_length"]
    assert SWEEP.output_tokens - 1 <= lengths["min"] <= lengths["max"] <= SWEEP.output_tokens + 1
