"""One genai-perf run (which drives Triton's perf_analyzer) and what we read from its
per-request export: TTFT, inter-token latency, end-to-end latency, tokens, goodput."""

from __future__ import annotations

import enum
import json
import math
import os
import shutil
import subprocess
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench.environments import perf_analyzer, perf_analyzer_libs
from bench.throughput import percentile


class Endpoint(str, enum.Enum):
    TRITON = "kserve"  # the ensemble over gRPC streaming (NVIDIA's tensorrtllm contract)
    OPENAI_CHAT = "chat"  # an OpenAI /v1/chat/completions server over HTTP SSE


@dataclass(frozen=True)
class Target:
    name: str
    endpoint: Endpoint
    url: str
    model: str
    extra_inputs: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Workload:
    name: str
    input_tokens_mean: int
    output_tokens_mean: int
    input_tokens_stddev: int = 0
    output_tokens_stddev: int = 0
    num_prompts: int = 100


@dataclass(frozen=True)
class Load:
    mode: str  # "concurrency" | "request-rate"
    value: float

    @property
    def request_count(self) -> int:
        """Requests measured: a count, not a time window, so a slow machine (a request
        outlasting the window) still gets a measurement and a fast one no short sample."""
        per_unit = 4 if self.mode == "concurrency" else 8  # 4 per concurrent stream; 8 s of arrivals
        return max(8, math.ceil(per_unit * self.value))

    @property
    def label(self) -> str:
        return f"c{int(self.value)}" if self.mode == "concurrency" else f"r{self.value:g}"


@dataclass(frozen=True)
class Slo:
    ttft_s: float
    itl_s: float


@dataclass
class RunResult:
    target: str
    workload: str
    load: str
    requests: int
    seconds: float
    output_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    goodput_rps: float  # requests/s that met both SLOs
    slo_met_fraction: float
    ttft_s: dict[str, float] = field(default_factory=dict)
    itl_s: dict[str, float] = field(default_factory=dict)
    latency_s: dict[str, float] = field(default_factory=dict)
    ttfts_s: list[float] = field(default_factory=list)  # every request, for the CDF
    artifacts: str = ""
    generator: str = ""  # the load generator that produced these figures (the report says so)

    def to_dict(self) -> dict:
        return asdict(self)


def command(
    tool_venv: Path,
    target: Target,
    workload: Workload,
    load: Load,
    tokenizer: Path,
    out_dir: Path,
    streaming: bool = True,
) -> list[str]:
    cmd = [
        str(tool_venv / "bin" / "genai-perf"),
        "profile",
        "-m",
        target.model,
        "--endpoint-type",
        target.endpoint.value,
        "-u",
        target.url,
        *(["--streaming"] if streaming else []),
        "--tokenizer",
        str(tokenizer.resolve()),
        "--synthetic-input-tokens-mean",
        str(workload.input_tokens_mean),
        "--synthetic-input-tokens-stddev",
        str(workload.input_tokens_stddev),
        "--output-tokens-mean",
        str(workload.output_tokens_mean),
        "--output-tokens-stddev",
        str(workload.output_tokens_stddev),
        "--num-dataset-entries",
        str(workload.num_prompts),
        "--random-seed",
        "7",
        "--request-count",
        str(load.request_count),
        "--artifact-dir",
        str(out_dir.resolve()),
        f"--{load.mode}",
        str(int(load.value) if load.mode == "concurrency" else load.value),
    ]
    if target.endpoint == Endpoint.TRITON:
        cmd += ["--backend", "tensorrtllm"]
    for key, value in target.extra_inputs:
        cmd += ["--extra-inputs", f"{key}:{json.dumps(value) if isinstance(value, bool) else value}"]
    return cmd


def tool_env() -> dict[str, str]:
    """The environment genai-perf runs in: the perf_analyzer of tritonclient 2.51 first on PATH,
    the shared libraries it links against found, nothing fetched from a model hub."""
    env = dict(os.environ)
    env["PATH"] = f"{perf_analyzer().parent}{os.pathsep}{env.get('PATH', '')}"
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        p for p in (str(perf_analyzer_libs()), env.get("LD_LIBRARY_PATH", "")) if p
    )
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


def export_cut_short(out_dir: Path) -> bool:
    """perf_analyzer's export exists but is not a whole JSON document (see `run`)."""
    export = next(out_dir.rglob("profile_export.json"), None)
    if export is None:
        return False
    try:
        json.loads(export.read_bytes() or b"")
    except ValueError:
        return True
    return False


CUT_SHORT_RERUNS = 2  # runs again after a cut-short export, at most


def run(
    tool_venv: Path,
    target: Target,
    workload: Workload,
    load: Load,
    tokenizer: Path,
    out_dir: Path,
    slo: Slo,
    streaming: bool = True,
) -> RunResult:
    """One genai-perf run; again (up to CUT_SHORT_RERUNS times) when perf_analyzer left its
    profile export cut short.

    perf_analyzer 2.51 records, for every response, every output the model declares; for one a
    response does not carry (NVIDIA's contract declares many that only some requests produce)
    it keeps whatever bytes it had.  When such an FP32 happens to be NaN or Inf, its JSON writer
    stops: the export stays empty (0 bytes) or ends at a 64 KiB buffer boundary, perf_analyzer
    still exits 0 and genai-perf fails reading it ("Input is a zero-length, empty document",
    "unexpected end of data").  Seen in 3 of 50 runs per layout, the server having answered
    every request (docs/examples/nvidia-clients.md), and once in a `make bench` run (its
    mixed-length sweep).  That signature, and only it, gets another run."""
    for attempt in range(CUT_SHORT_RERUNS + 1):
        try:
            return _run_once(tool_venv, target, workload, load, tokenizer, out_dir, slo, streaming)
        except RuntimeError:
            if attempt == CUT_SHORT_RERUNS or not export_cut_short(out_dir):
                raise
        warnings.warn(
            f"perf_analyzer wrote a cut-short profile export in {out_dir} (a perf_analyzer 2.51 bug); "
            "running genai-perf again",
            stacklevel=2,
        )
        shutil.rmtree(out_dir)
    raise AssertionError("unreachable")


def _run_once(
    tool_venv: Path,
    target: Target,
    workload: Workload,
    load: Load,
    tokenizer: Path,
    out_dir: Path,
    slo: Slo,
    streaming: bool,
) -> RunResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = command(tool_venv, target, workload, load, tokenizer, out_dir, streaming)
    with open(out_dir / "genai-perf.log", "w") as log:
        code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=tool_env(), cwd=out_dir)
    if code != 0:
        raise RuntimeError(f"genai-perf failed ({code}); see {out_dir / 'genai-perf.log'}")
    export = next(out_dir.rglob("profile_export.json"))
    result = parse_export(json.loads(export.read_text()), target, workload, load, tokenizer, slo, str(export.parent))
    summary = export.parent / "profile_export_genai_perf.json"
    if summary.is_file():  # throughput as the tool itself reports it; percentiles and goodput are ours
        figures = json.loads(summary.read_text())
        result.output_tokens_per_s = round(figures["output_token_throughput"]["avg"], 1)
        result.requests_per_s = round(figures["request_throughput"]["avg"], 3)
    return result


def _response_text(output: dict) -> str:
    """The text of one streamed response: Triton's text_output, or an SSE chunk's delta."""
    if "text_output" in output:
        return output.get("text_output") or ""
    raw = output.get("response", "")
    text = []
    for line in raw.splitlines():
        line = line.strip()
        if not line.startswith("data:") or line.endswith("[DONE]"):
            continue
        try:
            data = json.loads(line[5:])
        except json.JSONDecodeError:
            continue
        for choice in data.get("choices", []):
            text.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
    return "".join(text)


def parse_export(
    export: dict, target: Target, workload: Workload, load: Load, tokenizer: Path, slo: Slo, artifacts: str = ""
) -> RunResult:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer / "tokenizer.json"))
    experiment = export["experiments"][0]
    bounds = experiment.get("window_boundaries") or []
    start, end = (bounds[0], bounds[-1]) if len(bounds) >= 2 else (None, None)
    ttfts, itls, latencies, met, tokens = [], [], [], 0, 0
    for request in experiment["requests"]:
        t0 = request["timestamp"]
        if start is not None and not start <= t0 < end:
            continue
        stamps = [
            (ts, _response_text(out)) for ts, out in zip(request["response_timestamps"], request["response_outputs"])
        ]
        with_text = [ts for ts, text in stamps if text]
        if not with_text:
            continue
        n = len(tok.encode("".join(text for _, text in stamps), add_special_tokens=False).ids)
        ttft = (with_text[0] - t0) / 1e9
        itl = (with_text[-1] - with_text[0]) / 1e9 / (n - 1) if n > 1 else 0.0
        ttfts.append(ttft)
        itls.append(itl)
        latencies.append((stamps[-1][0] - t0) / 1e9)
        tokens += n
        met += ttft <= slo.ttft_s and itl <= slo.itl_s
    seconds = (end - start) / 1e9 if start is not None else max(latencies, default=0.0)
    count = len(ttfts)
    return RunResult(
        target=target.name,
        workload=workload.name,
        load=load.label,
        requests=count,
        seconds=round(seconds, 3),
        output_tokens=tokens,
        output_tokens_per_s=round(tokens / seconds, 1) if seconds else 0.0,
        requests_per_s=round(count / seconds, 3) if seconds else 0.0,
        goodput_rps=round(met / seconds, 3) if seconds else 0.0,
        slo_met_fraction=round(met / count, 3) if count else 0.0,
        ttft_s=percentiles(ttfts),
        itl_s=percentiles(itls),
        latency_s=percentiles(latencies),
        ttfts_s=sorted(round(t, 4) for t in ttfts),
        artifacts=artifacts,
        generator="genai-perf + perf_analyzer",
    )


def percentiles(values: list[float]) -> dict[str, float]:
    return {f"p{q}": round(percentile(values, q / 100), 4) for q in (50, 90, 95, 99)}
