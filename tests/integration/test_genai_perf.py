"""genai-perf --backend tensorrtllm --endpoint-type kserve, as NVIDIA's docs run it, against our
`ensemble` and `tensorrt_llm_bls`, streaming and not: short runs (concurrency 2, 8 requests,
32-token synthetic prompts, 16 output tokens) that must exit 0 with every request answered.  And
genai-perf --endpoint-type chat against the front with the `--extra-inputs ignore_eos:true
--extra-inputs min_tokens:16` that vLLM-style servers take: every answer exactly 16 tokens by
the server's usage, non-zero TTFT and ITL, its row in the session's PASS/FAIL table
(compat_table.py).

genai-perf lives in its own environment (build/bench-tools, from requirements/bench-tools.lock:
it needs numpy 2) and drives the perf_analyzer of tritonclient 2.51 from the project's venv,
exactly as `make bench` does (bench/genai_perf.py).  The first run creates that environment
(about a minute).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest

from bench.environments import TEST_ENVIRONMENTS, ensure_venv, perf_analyzer, pinned
from bench.genai_perf import Endpoint, Load, RunResult, Slo, Target, Workload, command, run, tool_env
from contract import names
from tests.integration.compat_table import ASKED_LENGTH, COMPLETES, LATENCIES
from tests.integration.openai_front_process import MODEL

pytestmark = [pytest.mark.server, pytest.mark.slow]

OUTPUT_TOKENS = 16
WORKLOAD = Workload("isl32-osl16", input_tokens_mean=32, output_tokens_mean=OUTPUT_TOKENS, num_prompts=8)
LOAD = Load("concurrency", 2)  # 8 requests (Load.request_count)
SLO = Slo(ttft_s=60.0, itl_s=10.0)  # not under test here
# Every entry point on the CPU layout, streaming and not; the GPU layouts' streaming BLS (the
# load that crashed tritonserver, issue 15) on the stand-ins of both GPU engines; the relay
# layout is the stand-in layout's wiring with the CPU engine behind it, and is left out.
GENERATOR = f"genai-perf {pinned('bench-tools', 'genai-perf')}"
# genai-perf 0.0.16 sends each --extra-inputs name:value in every request's body (true/false as
# booleans, digits as integers) and a value that is a JSON object merged whole
# (genai_perf/subcommand/common.py get_extra_inputs_as_dict, perf_analyzer r25.08 @2586c440):
# vLLM's ignore_eos and min_tokens.  Not stream_options.include_usage: genai-perf 0.0.16 reads
# choices[0] of every chunk and fails on the usage chunk's empty choices (IndexError at
# genai_perf/profile_data_parser/llm_profile_data_parser.py:518, same commit), so each answer's
# length is read as the server reports it: finish_reason "length" at max_tokens.
CHAT_EXTRA_INPUTS = (("ignore_eos", True), ("min_tokens", OUTPUT_TOKENS))
RUNS = [("server", names.ENSEMBLE, True), ("server", names.ENSEMBLE, False), ("server", names.LLM_BLS, True),
        ("server", names.LLM_BLS, False), ("standin_server", names.LLM_BLS, True),
        ("pytorch_server", names.LLM_BLS, True)]


@pytest.fixture(scope="session")
def bench_tools() -> Path:
    return ensure_venv("bench-tools", TEST_ENVIRONMENTS["bench-tools"])


def profile(bench_tools: Path, target: Target, engine: Path, out_dir: Path, streaming: bool = True) -> RunResult:
    """One genai-perf run (bench.genai_perf.run runs it again when perf_analyzer 2.51 cuts its
    export short)."""
    return run(bench_tools, target, WORKLOAD, LOAD, engine, out_dir, SLO, streaming=streaming)


def _requests(out_dir: Path) -> list[dict]:
    export = json.loads(next(out_dir.rglob("profile_export.json")).read_text())
    return export["experiments"][0]["requests"]


def _text(request: dict) -> str:
    return "".join(output.get("text_output") or "" for output in request["response_outputs"])


def _output_tokens(request: dict) -> int:
    """num_output_tokens of the response that says why the request finished.  A streamed request
    that a relay or the BLS ends with a closing response (no token: it lets postprocessing
    flush held-back text) gets that response too; like every response after the finish it
    carries no text and repeats the outcome (model_repository/text/stream_postprocessor.py);
    the empty final response of a decoupled model carries no outputs at all.
    Responses without a finish_reason are not read for it: perf_analyzer 2.51 exports every
    output of the model's metadata for every response, stale bytes where one carries none."""
    outputs = request["response_outputs"]
    finished = [n for n, o in enumerate(outputs) if o.get("finish_reason") in ("stop", "length")]
    assert finished, outputs
    first, after = outputs[finished[0]], outputs[finished[0] + 1:]
    assert all(not o.get("text_output") for o in after), f"text after the finish: {outputs}"
    repeated = [o for o in after if o.get("finish_reason")]  # not the empty final response (no outputs)
    assert all(o["finish_reason"] == first["finish_reason"] and o.get("num_output_tokens") == first["num_output_tokens"]
               for o in repeated), f"a later response changes the outcome: {outputs}"
    return int(first["num_output_tokens"])


@pytest.mark.parametrize("layout,model,streaming", RUNS,
                         ids=[f"{layout.removesuffix('_server')}-{model}-{'streaming' if s else 'whole'}" for layout, model, s in RUNS])
def test_genai_perf_completes_every_request(request, bench_tools, default_engine, tmp_path, layout, model, streaming,
                                            compat_table):
    served = request.getfixturevalue(layout)
    target = Target(model, Endpoint.TRITON, served.settings.grpc_url, model)
    row = compat_table.row(GENERATOR, f"{layout.removesuffix('_server')} {model}, kserve gRPC, "
                           f"{'streaming' if streaming else 'whole'}", features=(COMPLETES,))
    try:
        _completes_every_request(bench_tools, default_engine, tmp_path, target, streaming)
    except (AssertionError, RuntimeError) as failed:
        row.check(COMPLETES, False, f"{type(failed).__name__}: {str(failed)[:300]}")
        raise
    row.check(COMPLETES, True)


def _completes_every_request(bench_tools: Path, default_engine: Path, tmp_path: Path, target: Target,
                             streaming: bool) -> None:
    result = profile(bench_tools, target, default_engine, tmp_path, streaming)
    requests = _requests(tmp_path)
    assert len(requests) == LOAD.request_count
    for sent in requests:
        assert sent["request_inputs"]["max_tokens"] == OUTPUT_TOKENS
        assert ("stream" in sent["request_inputs"]) == streaming  # genai-perf sends the tensor only when streaming
        assert _text(sent).strip(), sent["response_outputs"]
        assert 0 < _output_tokens(sent) <= OUTPUT_TOKENS
        with_text = [o for o in sent["response_outputs"] if o.get("text_output")]
        if streaming:
            assert len(with_text) > 1 or _output_tokens(sent) == 1  # a response per step
        else:
            assert len(with_text) == 1
    assert result.output_tokens > 0


def _inference_counts(http_url: str, model: str) -> tuple[int, int]:
    with urllib.request.urlopen(f"{http_url}/v2/models/{model}/stats", timeout=10) as response:
        stats = json.loads(response.read())["model_stats"][0]["inference_stats"]
    return stats["success"]["count"], stats["fail"]["count"]


def test_output_tokens_mean_deterministic_sends_min_length_which_perf_analyzer_refuses(
        server, bench_tools, default_engine, tmp_path):
    """--output-tokens-mean-deterministic adds min_length (TensorRT-LLM's pre-1.0 name) to every
    request.  Neither NVIDIA's 1.x ensemble nor ours declares it, and perf_analyzer 2.51 checks
    its input data against the model's configuration before sending anything: the run fails,
    loudly, on the client, and no request reaches the server.  `--extra-inputs min_tokens:N` is
    the 1.x spelling (next test)."""
    target = Target(names.ENSEMBLE, Endpoint.TRITON, server.settings.grpc_url, names.ENSEMBLE)
    cmd = command(bench_tools, target, WORKLOAD, LOAD, default_engine, tmp_path) + ["--output-tokens-mean-deterministic"]
    before = _inference_counts(server.settings.http_url, names.ENSEMBLE)
    genai_perf = subprocess.run(cmd, env=tool_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert genai_perf.returncode != 0, "genai-perf passed although perf_analyzer cannot send min_length"
    inputs_file = next(tmp_path.rglob("inputs.json"))
    rows = json.loads(inputs_file.read_text())["data"]
    assert rows and all(row["min_length"] == [OUTPUT_TOKENS] for row in rows)
    # genai-perf hides perf_analyzer's output; the same perf_analyzer call on the same input data says why
    analyzer = subprocess.run(
        [str(perf_analyzer()), "-m", names.ENSEMBLE, "--async", "-i", "grpc", "--streaming", "-u", server.settings.grpc_url,
         "--shape", "max_tokens:1", "--shape", "text_input:1", "--concurrency-range", "1", "--request-count", "1",
         "--service-kind", "triton", "--input-data", str(inputs_file)],
        env=tool_env(), capture_output=True, text=True, timeout=120)
    assert analyzer.returncode != 0
    assert "'min_length' is not found in the model configuration" in analyzer.stdout + analyzer.stderr
    assert _inference_counts(server.settings.http_url, names.ENSEMBLE) == before  # nothing was sent


def test_min_tokens_extra_input_gives_deterministic_output_lengths(server, bench_tools, default_engine, tmp_path,
                                                                   compat_table):
    target = Target(names.ENSEMBLE, Endpoint.TRITON, server.settings.grpc_url, names.ENSEMBLE,
                    (("min_tokens", OUTPUT_TOKENS),))
    row = compat_table.row(GENERATOR, f"{names.ENSEMBLE}, kserve gRPC, min_tokens", features=(COMPLETES, ASKED_LENGTH))
    profile(bench_tools, target, default_engine, tmp_path)
    requests = _requests(tmp_path)
    row.check(COMPLETES, len(requests) == LOAD.request_count, f"{len(requests)} requests")
    lengths = [_output_tokens(sent) for sent in requests]
    row.check(ASKED_LENGTH, all(sent["request_inputs"]["min_tokens"] == OUTPUT_TOKENS for sent in requests)
              and lengths == [OUTPUT_TOKENS] * LOAD.request_count, f"lengths {lengths}")
    row.assert_passed()


def _sse_chunks(request: dict) -> list[dict]:
    """The JSON chunks of a streamed chat request's responses (perf_analyzer's raw SSE lines)."""
    chunks = []
    for output in request["response_outputs"]:
        for line in output.get("response", "").splitlines():
            line = line.strip()
            if line.startswith("data:") and not line.endswith("[DONE]"):
                chunks.append(json.loads(line[5:]))
    return chunks


def test_genai_perf_chat_with_ignore_eos_and_min_tokens_gets_every_answer_at_the_asked_length(
        agent_front, bench_tools, default_engine, tmp_path, compat_table):
    target = Target("chat", Endpoint.OPENAI_CHAT, agent_front, MODEL, CHAT_EXTRA_INPUTS)
    row = compat_table.row(GENERATOR, "chat, streaming, ignore_eos + min_tokens")
    cmd = command(bench_tools, target, WORKLOAD, LOAD, default_engine, tmp_path)
    assert cmd[cmd.index("ignore_eos:true") - 1] == "--extra-inputs" and f"min_tokens:{OUTPUT_TOKENS}" in cmd
    done = subprocess.run(cmd, env=tool_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if not row.check(COMPLETES, done.returncode == 0, f"exit {done.returncode}"):
        raise AssertionError(f"{row.failures()}\n{(done.stdout + done.stderr)[-3000:]}")
    requests = _requests(tmp_path)
    sent = [json.loads(r["request_inputs"]["payload"]) for r in requests]
    chunks = [_sse_chunks(r) for r in requests]
    finishes = [[c["choices"][0]["finish_reason"] for c in cs
                 if c.get("choices") and c["choices"][0].get("finish_reason")] for cs in chunks]
    summary = json.loads(next(tmp_path.rglob("profile_export_genai_perf.json")).read_text())
    ttfts = [r["response_timestamps"][0] - r["timestamp"] for r in requests]
    itls = [(r["response_timestamps"][-1] - r["response_timestamps"][0]) / max(1, len(r["response_timestamps"]) - 1)
            for r in requests]
    print(f"\n{GENERATOR} chat c2: {len(requests)} requests, finish reasons {finishes}, output length by "
          f"genai-perf's re-encoding {summary['output_sequence_length']}, TTFT mean "
          f"{summary['time_to_first_token']['avg']:.0f} ms, ITL mean {summary['inter_token_latency']['avg']:.1f} ms")
    errors = [c["error"] for cs in chunks for c in cs if "error" in c]
    row.check(COMPLETES, len(requests) == LOAD.request_count and not errors,
              f"{len(requests)} requests, errors {errors}")
    asked = all(body["ignore_eos"] is True and body["min_tokens"] == body["max_tokens"] == OUTPUT_TOKENS
                for body in sent)
    # the engine stops at max_tokens with finish_reason "length", before it with "stop"
    row.check(ASKED_LENGTH, asked and finishes == [["length"]] * len(requests), f"sent {sent[:1]}, finishes {finishes}")
    row.check(LATENCIES, all(t > 0 for t in ttfts) and all(i > 0 for i in itls), f"TTFT {ttfts} ns, ITL {itls} ns")
    row.assert_passed()
