"""bench/aiperf.py: the AIPerf 0.13.0 command lines of the HTTP sweeps and the reading of its
export.  The exports under tests/unit/data/aiperf/ are real ones (the sweep of
docs/results/2026-11-27-aiperf.md, concurrency 4), trimmed to the fields read here plus the
command that produced them; their records keep the per-request metrics only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jinja2
import pytest

from bench import aiperf, report
from bench.genai_perf import Slo

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data" / "aiperf"
CHAT = aiperf.Target(aiperf.Kind.OPENAI_CHAT, "http://127.0.0.1:9000", "SmolLM2-135M-Instruct")
ENSEMBLE = aiperf.Target(aiperf.Kind.TRITON_GENERATE, "http://127.0.0.1:8000", "ensemble")
SWEEP = aiperf.Sweep(input_tokens=128, output_tokens=64, requests_per_stream=2, min_requests=4)
SLO = Slo(ttft_s=1.0, itl_s=0.06)


def _option(cmd: list[str], name: str) -> list[str]:
    return [cmd[i + 1] for i, arg in enumerate(cmd) if arg == name]


def test_targets_are_the_front_chat_and_generate_stream_of_each_entry_model():
    found = aiperf.targets("http://h:1", "http://h:2", "served", ("ensemble", "tensorrt_llm_bls"))
    assert [t.name for t in found] == ["openai-chat-stream", "triton-generate-stream ensemble",
                                       "triton-generate-stream tensorrt_llm_bls"]
    assert [t.endpoint for t in found] == ["/v1/chat/completions", "/v2/models/ensemble/generate_stream",
                                           "/v2/models/tensorrt_llm_bls/generate_stream"]
    assert [t.url for t in found] == ["http://h:1", "http://h:2", "http://h:2"]


def test_request_count_grows_with_concurrency_from_a_floor():
    assert [SWEEP.request_count(c) for c in (1, 2, 4, 16)] == [4, 4, 8, 32]
    assert SWEEP.workload == "isl128-osl64"


def test_chat_command(tmp_path):
    cmd = aiperf.command(Path("/venv"), CHAT, SWEEP, 4, tmp_path / "tok", tmp_path / "out", SLO)
    assert cmd[:2] == ["/venv/bin/aiperf", "profile"]
    assert "--streaming" in cmd
    assert _option(cmd, "--endpoint-type") == ["chat"]
    assert _option(cmd, "--endpoint") == []  # AIPerf's own /v1/chat/completions
    assert _option(cmd, "--url") == [CHAT.url]
    assert _option(cmd, "--model") == [CHAT.model]
    assert _option(cmd, "--concurrency") == ["4"]
    assert _option(cmd, "--request-count") == ["8"]
    assert _option(cmd, "--synthetic-input-tokens-mean") == ["128"]
    assert _option(cmd, "--output-tokens-mean") == ["64"]
    # fixed-length answers as AIPerf's README says for vLLM-style servers, counted by the server
    assert _option(cmd, "--extra-inputs") == ["ignore_eos:true", "min_tokens:64"]
    assert "--use-server-token-count" in cmd
    assert _option(cmd, "--goodput") == ["time_to_first_token:1000 inter_token_latency:60"]
    assert _option(cmd, "--tokenizer") == [str((tmp_path / "tok").resolve())]
    assert _option(cmd, "--artifact-dir") == [str((tmp_path / "out").resolve())]
    assert _option(cmd, "--ui") == ["none"]


def test_no_slo_no_goodput(tmp_path):
    assert "--goodput" not in aiperf.command(Path("/venv"), CHAT, SWEEP, 1, tmp_path, tmp_path)


def test_generate_stream_command_uses_the_template_endpoint_with_a_resolved_template_file(tmp_path):
    """AIPerf takes a template path with a symlink in it (build/ is one) for an inline template,
    and splits --extra-inputs values on commas: the body goes in a file, passed resolved."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    out = tmp_path / "link" / "run"
    out.mkdir()
    template = aiperf.write_template(out)
    cmd = aiperf.command(Path("/venv"), ENSEMBLE, SWEEP, 1, tmp_path, out, SLO)
    assert _option(cmd, "--endpoint-type") == ["template"]
    assert _option(cmd, "--endpoint") == ["/v2/models/ensemble/generate_stream"]
    extra = _option(cmd, "--extra-inputs")
    assert extra == [f"payload_template:{tmp_path.resolve() / 'real' / 'run' / aiperf.TEMPLATE_FILE}",
                     "response_field:text_output"]
    path = Path(extra[0].split(":", 1)[1])
    assert path == template and path.is_file() and not any(p.is_symlink() for p in (path, *path.parents))


def test_template_renders_the_generate_request_as_aiperf_renders_it():
    """AIPerf 0.13.0 renders with jinja2.Environment(autoescape=True) and parses the result as JSON."""
    text = 'He said "stop" <here> & then\nleft \u00e9'
    body = jinja2.Environment(autoescape=True).from_string(aiperf.GENERATE_TEMPLATE).render(
        text=text, max_tokens=64, stream=True)
    assert json.loads(body) == {"text_input": text, "max_tokens": 64, "min_tokens": 64, "stream": True}


def test_tool_env_drops_the_hub_offline_switches():
    env = aiperf.tool_env({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "0", "PATH": "/bin"})
    assert env == {"PATH": "/bin", "TOKENIZERS_PARALLELISM": "false"}


def _export(name: str) -> tuple[dict, list[dict]]:
    folder = DATA / name
    return json.loads((folder / aiperf.SUMMARY).read_text()), aiperf.read_records(folder / aiperf.RECORDS)


@pytest.mark.parametrize("name,target", [("chat-c4", CHAT), ("ensemble-c4", ENSEMBLE)])
def test_parse_real_export(name, target):
    summary, records = _export(name)
    assert summary["aiperf_version"] == "0.13.0"
    result = aiperf.parse_export(summary, records, target, SWEEP, 4, "runs/x")
    assert result.generator == "AIPerf 0.13.0"
    assert (result.target, result.workload, result.load, result.artifacts) == (target.name, "isl128-osl64", "c4", "runs/x")
    assert result.requests == summary["request_count"]["avg"] == len(result.ttfts_s) == SWEEP.request_count(4)
    assert result.output_tokens == summary["total_output_tokens"]["avg"]
    assert result.output_tokens_per_s == round(summary["output_token_throughput"]["avg"], 1) > 0
    assert result.requests_per_s == round(summary["request_throughput"]["avg"], 3) > 0
    assert result.seconds == round(summary["benchmark_duration"]["avg"], 3)
    for key, metric in (("ttft_s", "time_to_first_token"), ("itl_s", "inter_token_latency"), ("latency_s", "request_latency")):
        assert getattr(result, key) == {q: round(summary[metric][q] / 1000, 4) for q in ("p50", "p90", "p95", "p99")}
    assert result.ttft_s["p50"] <= result.ttft_s["p99"] < result.latency_s["p99"]
    assert result.goodput_rps == round(summary["goodput"]["avg"], 3)
    assert result.slo_met_fraction == round(summary["good_request_fraction"]["avg"], 3)
    assert 0 <= result.goodput_rps <= result.requests_per_s
    assert result.ttfts_s == sorted(result.ttfts_s)
    assert min(result.ttfts_s) == round(summary["time_to_first_token"]["min"] / 1000, 4)
    # the fixtures were produced by the command this module builds
    cli = summary["run_info"]["cli_command"]
    assert "--streaming" in cli and "--concurrency 4" in cli
    assert ("'template'" in cli) == (target.kind == aiperf.Kind.TRITON_GENERATE)


def test_without_slo_there_is_no_goodput():
    summary, records = _export("chat-c4")
    for key in ("goodput", "good_request_count", "good_request_fraction"):
        summary.pop(key)
    result = aiperf.parse_export(summary, records, CHAT, SWEEP, 4)
    assert math.isnan(result.goodput_rps) and math.isnan(result.slo_met_fraction)
    row = aiperf.markdown([result])[2]
    assert "| - | - |" in row and row.endswith("| AIPerf 0.13.0 |")


def test_failed_requests_or_another_version_are_refused():
    summary, records = _export("ensemble-c4")
    with pytest.raises(RuntimeError, match="failed requests"):
        aiperf.parse_export({**summary, "error_summary": [{"error_details": {"code": 500}, "count": 1}]}, records,
                            ENSEMBLE, SWEEP, 4)
    with pytest.raises(ValueError, match="0.12"):
        aiperf.parse_export({**summary, "aiperf_version": "0.12.0"}, records, ENSEMBLE, SWEEP, 4)
    with pytest.raises(RuntimeError, match="no request"):
        aiperf.parse_export({**summary, "request_count": {"avg": 0.0}}, records, ENSEMBLE, SWEEP, 4)


def test_reports_say_which_generator_produced_each_figure(tmp_path):
    summary, records = _export("ensemble-c4")
    result = aiperf.parse_export(summary, records, ENSEMBLE, SWEEP, 4)
    table = report.results_table([result])
    assert table[0].startswith("| target | generator |")
    assert table[2].startswith("| triton-generate-stream ensemble | AIPerf 0.13.0 |")
    text = aiperf.write_report(tmp_path, [result], ["heading"]).read_text()
    assert "AIPerf 0.13.0" in text
    assert json.loads((tmp_path / "results.json").read_text())["runs"][0]["generator"] == "AIPerf 0.13.0"


def test_the_lock_pins_this_aiperf_and_every_package_exactly():
    lines = [line for line in (ROOT / "requirements" / "aiperf.lock").read_text().splitlines()
             if line and not line.startswith("#")]
    assert f"aiperf=={aiperf.VERSION}" in lines
    assert all("==" in line and " " not in line for line in lines)
