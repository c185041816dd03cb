"""guidellm 0.8.1 (the vLLM project's benchmark tool, pinned in requirements/guidellm.lock) against a
live front, as a new user runs it: a short concurrent run of synthetic prompts, which sends vLLM's
`stream_options.continuous_usage_stats` and `ignore_eos` (issue 47: before the front honoured them,
8 of 8 requests failed and the table was zeros).  It must finish every request without an error,
with non-zero time to first token and inter-token latency, every answer exactly the asked length
(its row in the session's PASS/FAIL table: compat_table.py).  About 30-60 s on a 2-core host once
the environment is made (CI makes it in the background: bench/environments.py TEST_ENVIRONMENTS)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench.environments import ensure_test_environments, pinned
from tests.integration.compat_table import ASKED_LENGTH, COMPLETES, LATENCIES
from tests.integration.openai_front_process import running_front

pytestmark = [pytest.mark.server, pytest.mark.slow]
REQUESTS, STREAMS, PROMPT_TOKENS, OUTPUT_TOKENS = 8, 2, 64, 32
GENERATOR = f"guidellm {pinned('guidellm', 'guidellm')}"


def _find(tree, key):
    """Every value under `key` anywhere in guidellm's JSON report."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key:
                yield v
            yield from _find(v, key)
    elif isinstance(tree, list):
        for v in tree:
            yield from _find(v, key)


def test_guidellm_concurrent_run_has_no_errors_and_real_latencies(server, default_checkpoint, tmp_path, compat_table):
    venv = ensure_test_environments(("guidellm",))["guidellm"]
    row = compat_table.row(GENERATOR, f"chat, {STREAMS} streams, ignore_eos")
    report = tmp_path / "benchmarks.json"
    with running_front(server.settings.grpc_url, tmp_path) as base:
        run = subprocess.run(
            [str(venv / "bin" / "guidellm"), "run",
             "--backend", f"kind=openai_http,target={base}",
             "--profile", f"kind=concurrent,streams={STREAMS}",
             "--constraint", f"kind=max_requests,count={REQUESTS}",
             "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},output_tokens={OUTPUT_TOKENS}",
             "--tokenizer", f"kind=hf_auto,model={default_checkpoint}",
             "--output", f"kind=json,path={report}", "--disable-console-interactive"],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
            env=os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_COLOR": "1"})
    log = (run.stdout + run.stderr)[-4000:]
    if not row.check(COMPLETES, run.returncode == 0 and report.is_file(), f"exit {run.returncode}"):
        raise AssertionError(f"{row.failures()}\n{log}")
    metrics = json.loads(report.read_text())["benchmarks"][0]["metrics"]
    totals = metrics["request_totals"]
    ttft = metrics["time_to_first_token_ms"]["successful"]
    itl = metrics["inter_token_latency_ms"]["successful"]
    outputs = metrics["output_token_count"]["successful"]
    print(f"\n{GENERATOR}, {STREAMS} streams, {REQUESTS} requests of {PROMPT_TOKENS}+{OUTPUT_TOKENS} tokens: "
          f"{totals}; TTFT mean {ttft['mean']:.0f} ms (p50 {ttft['median']:.0f}), ITL mean {itl['mean']:.1f} ms, "
          f"output {metrics['output_tokens_per_second']['successful']['mean']:.1f} tok/s")
    row.check(COMPLETES, totals["errored"] == 0 and totals["incomplete"] == 0 and totals["successful"] == REQUESTS,
              f"{totals}")
    row.check(LATENCIES, ttft["count"] == REQUESTS and ttft["min"] > 0 and itl["mean"] > 0,
              f"TTFT {ttft['count']} min {ttft['min']}, ITL mean {itl['mean']}")
    # ignore_eos honoured: every answer is exactly the asked length
    row.check(ASKED_LENGTH, outputs["min"] == outputs["max"] == OUTPUT_TOKENS,
              f"output lengths {outputs['min']}-{outputs['max']}")
    if row.failures():
        raise AssertionError(f"{row.failures()}\n{log}")
