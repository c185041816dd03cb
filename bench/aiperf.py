"""AIPerf (NVIDIA's successor to genai-perf; 0.13.0, requirements/aiperf.lock, its own
environment build/aiperf) as the load generator of the HTTP sweeps of `make bench`: the
OpenAI front's /v1/chat/completions (streaming) and Triton's HTTP generate_stream of
`ensemble` and `tensorrt_llm_bls` (AIPerf's template endpoint), at each concurrency.

What AIPerf 0.13.0 does and does not do, as found running it here:
- no KServe gRPC transport from its CLI (`--transport` offers http only): the Triton-native
  gRPC sweeps stay with perf_analyzer;
- the template endpoint renders a Jinja2 body (`payload_template`) per request, and reads
  each SSE event (`data: {"text_output": ...}`) through a JMESPath `response_field`;
  `--extra-inputs` splits its values on commas, so the body goes in a file, and a file whose
  path has a symlink in it (build/ is one) is taken for an inline template: the path is passed
  resolved;
- with HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to anything it fails to load a local
  tokenizer directory (it asks the hub for a snapshot of the path), so both are removed from its
  environment and the checkpoint's directory is passed (its built-in tokenizer would download a
  file on first use);
- it writes profile_export_aiperf.json (the summary: every metric with avg and percentiles, in
  ms), profile_export_aiperf.csv and profile_export.jsonl (one record per request).
"""

from __future__ import annotations

import enum
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.genai_perf import RunResult, Slo

VERSION = "0.13.0"
GENERATOR = f"AIPerf {VERSION}"
SUMMARY = "profile_export_aiperf.json"
RECORDS = "profile_export.jsonl"
TEMPLATE_FILE = "payload_template.json"
# Triton's generate_stream of the ensemble / tensorrt_llm_bls (NVIDIA's tensorrtllm contract):
# exactly max_tokens tokens (min_tokens), so every run generates the same amount of work.
GENERATE_TEMPLATE = (
    '{"text_input": {{ text|tojson }}, "max_tokens": {{ max_tokens }}, '
    '"min_tokens": {{ max_tokens }}, "stream": {{ stream|tojson }}}'
)
# AIPerf 0.13.0's README (the wheel's METADATA, "Known Issues"): the output length "cannot be
# guaranteed unless you pass `ignore_eos` and/or `min_tokens` via `--extra-inputs` to an inference
# server that supports them": vLLM's extensions, which the front honours (openai_front VLLM_EXTENSIONS).
# With --use-server-token-count AIPerf counts the server's usage.completion_tokens (it asks for
# stream_options.include_usage) instead of encoding the received text again, so an answer of the
# asked length reads as exactly that length.


def chat_extra_inputs(output_tokens: int) -> tuple[str, ...]:
    """The --extra-inputs of a chat run: every answer exactly `output_tokens` long."""
    return ("ignore_eos:true", f"min_tokens:{output_tokens}")


# Environment variables that break AIPerf 0.13.0's loading of a local tokenizer directory.
HUB_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


class Kind(str, enum.Enum):
    OPENAI_CHAT = "openai-chat-stream"  # the OpenAI front, /v1/chat/completions, SSE
    TRITON_GENERATE = "triton-generate-stream"  # Triton's HTTP /v2/models/<model>/generate_stream, SSE


@dataclass(frozen=True)
class Target:
    kind: Kind
    url: str  # base URL: http://host:port
    model: str  # the served model name (chat) or the Triton model (generate_stream)

    @property
    def name(self) -> str:
        return self.kind.value if self.kind == Kind.OPENAI_CHAT else f"{self.kind.value} {self.model}"

    @property
    def endpoint(self) -> str:
        return "/v1/chat/completions" if self.kind == Kind.OPENAI_CHAT else f"/v2/models/{self.model}/generate_stream"


def targets(openai_url: str, http_url: str, served_model: str, triton_models: tuple[str, ...]) -> list[Target]:
    """The sweep's targets: the front's chat, then generate_stream of each Triton entry model."""
    return [
        Target(Kind.OPENAI_CHAT, openai_url, served_model),
        *(Target(Kind.TRITON_GENERATE, http_url, model) for model in triton_models),
    ]


@dataclass(frozen=True)
class Sweep:
    input_tokens: int = 128
    output_tokens: int = 128
    requests_per_stream: int = 4  # requests measured per concurrent stream (at least min_requests)
    min_requests: int = 8
    seed: int = 7

    def request_count(self, concurrency: int) -> int:
        return max(self.min_requests, self.requests_per_stream * concurrency)

    @property
    def workload(self) -> str:
        return f"isl{self.input_tokens}-osl{self.output_tokens}"


def command(
    venv: Path, target: Target, sweep: Sweep, concurrency: int, tokenizer: Path, out_dir: Path, slo: Slo | None = None
) -> list[str]:
    """The one `aiperf profile` command line of a run (out_dir must exist for the template file
    of a generate_stream target: `write_template`)."""
    out = out_dir.resolve()
    cmd = [
        str(venv / "bin" / "aiperf"),
        "profile",
        "--model",
        target.model,
        "--url",
        target.url,
        "--streaming",
        "--tokenizer",
        str(tokenizer.resolve()),
        "--synthetic-input-tokens-mean",
        str(sweep.input_tokens),
        "--synthetic-input-tokens-stddev",
        "0",
        "--output-tokens-mean",
        str(sweep.output_tokens),
        "--output-tokens-stddev",
        "0",
        "--concurrency",
        str(concurrency),
        "--request-count",
        str(sweep.request_count(concurrency)),
        "--warmup-request-count",
        str(concurrency),
        "--random-seed",
        str(sweep.seed),
        "--artifact-dir",
        str(out),
        "--ui",
        "none",
        "--no-server-metrics",
        "--no-gpu-telemetry",
        # one worker and one record processor: AIPerf's own processes share the host with the server
        "--workers-max",
        "1",
        "--record-processor-service-count",
        "1",
    ]
    if target.kind == Kind.OPENAI_CHAT:
        cmd += ["--endpoint-type", "chat", "--use-server-token-count"]
        cmd += [arg for extra in chat_extra_inputs(sweep.output_tokens) for arg in ("--extra-inputs", extra)]
    else:
        cmd += [
            "--endpoint-type",
            "template",
            "--endpoint",
            target.endpoint,
            "--extra-inputs",
            f"payload_template:{out / TEMPLATE_FILE}",
            "--extra-inputs",
            "response_field:text_output",
        ]
    if slo is not None:
        cmd += ["--goodput", f"time_to_first_token:{slo.ttft_s * 1000:g} inter_token_latency:{slo.itl_s * 1000:g}"]
    return cmd


def write_template(out_dir: Path) -> Path:
    path = out_dir.resolve() / TEMPLATE_FILE
    path.write_text(GENERATE_TEMPLATE + "\n")
    return path


def tool_env(base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for name in HUB_OFFLINE_VARIABLES:
        env.pop(name, None)
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def _seconds(metric: dict | None) -> dict[str, float]:
    """AIPerf's ms percentiles as the report's seconds (p50/p90/p95/p99)."""
    if not metric:
        return {q: float("nan") for q in ("p50", "p90", "p95", "p99")}
    return {q: round(metric[q] / 1000, 4) for q in ("p50", "p90", "p95", "p99")}


def _avg(summary: dict, key: str, default: float = 0.0) -> float:
    metric = summary.get(key)
    return float(metric["avg"]) if metric else default


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def parse_export(
    summary: dict, records: list[dict], target: Target, sweep: Sweep, concurrency: int, artifacts: str = ""
) -> RunResult:
    """One run's figures from AIPerf's own export: throughput, percentiles and goodput are the
    tool's (goodput only where the run was given SLOs), the TTFT of every request from its records."""
    if summary.get("aiperf_version") != VERSION:
        raise ValueError(f"export of AIPerf {summary.get('aiperf_version')}, not {VERSION}")
    if summary.get("error_summary") or _avg(summary, "request_error_rate"):
        raise RuntimeError(f"AIPerf saw failed requests against {target.name}: {summary.get('error_summary')}")
    completed = int(_avg(summary, "request_count"))
    if not completed:
        raise RuntimeError(f"AIPerf completed no request against {target.name}")
    seconds = _avg(summary, "benchmark_duration")
    has_goodput = "goodput" in summary
    ttfts = sorted(
        round(r["metrics"]["time_to_first_token"]["value"] / 1000, 4)
        for r in records
        if r.get("metadata", {}).get("benchmark_phase") == "profiling" and "time_to_first_token" in r.get("metrics", {})
    )
    return RunResult(
        target=target.name,
        workload=sweep.workload,
        load=f"c{concurrency}",
        requests=completed,
        seconds=round(seconds, 3),
        output_tokens=int(_avg(summary, "total_output_tokens")),
        output_tokens_per_s=round(_avg(summary, "output_token_throughput"), 1),
        requests_per_s=round(_avg(summary, "request_throughput"), 3),
        goodput_rps=round(_avg(summary, "goodput"), 3) if has_goodput else float("nan"),
        slo_met_fraction=round(_avg(summary, "good_request_fraction"), 3) if has_goodput else float("nan"),
        ttft_s=_seconds(summary.get("time_to_first_token")),
        itl_s=_seconds(summary.get("inter_token_latency")),
        latency_s=_seconds(summary.get("request_latency")),
        ttfts_s=ttfts,
        artifacts=artifacts,
        generator=GENERATOR,
    )


def run(
    venv: Path, target: Target, sweep: Sweep, concurrency: int, tokenizer: Path, out_dir: Path, slo: Slo | None = None
) -> RunResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    if target.kind == Kind.TRITON_GENERATE:
        write_template(out_dir)
    cmd = command(venv, target, sweep, concurrency, tokenizer, out_dir, slo)
    with open(out_dir / "aiperf.log", "w") as log:
        code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=tool_env(), cwd=out_dir)
    summary = out_dir / SUMMARY
    if code != 0 or not summary.is_file():
        raise RuntimeError(f"aiperf failed ({code}); see {out_dir / 'aiperf.log'}")
    records = out_dir / RECORDS
    return parse_export(
        json.loads(summary.read_text()),
        read_records(records) if records.is_file() else [],
        target,
        sweep,
        concurrency,
        str(out_dir),
    )


def sweep_targets(
    venv: Path,
    run_targets: list[Target],
    sweep: Sweep,
    levels: tuple[int, ...],
    tokenizer: Path,
    out: Path,
    slo: Slo | None = None,
) -> list[RunResult]:
    """Every target at every concurrency (ascending), one AIPerf run each."""
    results = []
    for target in run_targets:
        for c in sorted(levels):
            slug = target.name.replace(" ", "-")
            result = run(venv, target, sweep, c, tokenizer, out / f"aiperf-{slug}-c{c}", slo)
            results.append(result)
            print(
                f"  {result.target:40} c{c:<3}: {result.output_tokens_per_s:7.1f} tok/s  "
                f"TTFT p50 {result.ttft_s['p50'] * 1000:6.0f} ms  ITL p50 {result.itl_s['p50'] * 1000:5.1f} ms  "
                f"goodput {result.goodput_rps:.2f} req/s ({GENERATOR})",
                flush=True,
            )
    return results


def _ms(x: float) -> str:
    return "-" if x != x else f"{x * 1000:.0f}"


def markdown(results: list[RunResult]) -> list[str]:
    """The sweep's table; every figure in it is AIPerf's."""
    lines = [
        "| target | concurrency | requests | out tok/s | req/s | goodput req/s | SLO met | TTFT p50/p99 ms | "
        "ITL p50/p99 ms | generator |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        good = "-" if r.goodput_rps != r.goodput_rps else f"{r.goodput_rps:.2f}"
        met = "-" if r.slo_met_fraction != r.slo_met_fraction else f"{r.slo_met_fraction:.0%}"
        lines.append(
            f"| {r.target} | {r.load[1:]} | {r.requests} | {r.output_tokens_per_s:.1f} | {r.requests_per_s:.2f} | "
            f"{good} | {met} | {_ms(r.ttft_s['p50'])} / {_ms(r.ttft_s['p99'])} | "
            f"{_ms(r.itl_s['p50'])} / {_ms(r.itl_s['p99'])} | {r.generator} |"
        )
    return lines


def write_report(out: Path, results: list[RunResult], heading: list[str]) -> Path:
    """report.md (heading, then the table) and results.json of a standalone sweep."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"generator": GENERATOR, "runs": [r.to_dict() for r in results]}, indent=2) + "\n"
    )
    path = out / "report.md"
    path.write_text("\n".join([*heading, "", *markdown(results), ""]) + "\n")
    return path
