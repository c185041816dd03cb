"""perf_analyzer (tritonclient 2.51) on its own, for the Triton-native gRPC sweeps of `make bench`
(streaming, NVIDIA's tensorrtllm inputs): genai-perf used to write its input data and call it;
genai-perf now runs only in the NVIDIA-compatibility tests (tests/integration/test_genai_perf.py).

The prompts are windows of AIPerf's own corpus (the Shakespeare text its synthetic prompts come
from, in build/aiperf), cut to the asked number of tokens with the served model's tokenizer; the
input data (inputs.json) has genai-perf's layout, which is perf_analyzer's: one entry per request,
every input a list.  perf_analyzer's per-request export is read as before
(bench.genai_perf.parse_export), and a cut-short export (a perf_analyzer 2.51 bug, see
bench.genai_perf.run) gets the same reruns."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import warnings
from pathlib import Path

from bench.environments import perf_analyzer
from bench.genai_perf import (
    CUT_SHORT_RERUNS,
    Endpoint,
    Load,
    RunResult,
    Slo,
    Target,
    Workload,
    export_cut_short,
    parse_export,
    tool_env,
)

GENERATOR = "perf_analyzer 2.51 (gRPC)"
INPUTS = "inputs.json"
EXPORT = "profile_export.json"


def corpus(aiperf_venv: Path) -> Path:
    found = sorted(aiperf_venv.glob("lib/python*/site-packages/aiperf/dataset/generator/assets/shakespeare.txt"))
    if not found:
        raise RuntimeError(f"{aiperf_venv} has no AIPerf corpus (shakespeare.txt)")
    return found[0]


def _length(rng: random.Random, mean: int, stddev: int) -> int:
    return max(1, round(rng.gauss(mean, stddev))) if stddev else mean


def synthetic_inputs(token_ids: list[int], decode, workload: Workload, count: int, seed: int = 7) -> list[dict]:
    """`count` requests: prompts of ~input_tokens_mean tokens (windows of the corpus at random
    offsets, decoded), max_tokens ~output_tokens_mean (normal with the workload's stddevs)."""
    rng = random.Random(seed)
    entries = []
    for _ in range(count):
        n = _length(rng, workload.input_tokens_mean, workload.input_tokens_stddev)
        start = rng.randrange(0, max(1, len(token_ids) - n))
        entries.append(
            {
                "text_input": decode(token_ids[start : start + n]).strip(),
                "max_tokens": _length(rng, workload.output_tokens_mean, workload.output_tokens_stddev),
            }
        )
    return entries


def input_data(entries: list[dict], extra_inputs: tuple[tuple[str, object], ...] = (), streaming: bool = True) -> dict:
    """perf_analyzer's --input-data (genai-perf's inputs.json layout)."""
    rows = []
    for entry in entries:
        row = {"text_input": [entry["text_input"]], "max_tokens": [entry["max_tokens"]]}
        for key, value in extra_inputs:
            row[key] = [value]
        if streaming:
            row["stream"] = [True]
        rows.append(row)
    return {"data": rows}


def command(target: Target, load: Load, input_file: Path, export_file: Path, binary: Path | None = None) -> list[str]:
    if target.endpoint != Endpoint.TRITON:
        raise ValueError(f"perf_analyzer sweeps Triton over gRPC, not {target.endpoint.value}")
    mode = (
        ["--concurrency-range", str(int(load.value))]
        if load.mode == "concurrency"
        else ["--request-rate-range", f"{load.value:g}"]
    )
    return [
        str(binary or perf_analyzer()),
        "-m",
        target.model,
        "--async",
        "--service-kind",
        "triton",
        "-u",
        target.url,
        "-i",
        "grpc",
        "--streaming",
        "--shape",
        "max_tokens:1",
        "--shape",
        "text_input:1",
        "--input-data",
        str(input_file),
        "--request-count",
        str(load.request_count),
        *mode,
        "--profile-export-file",
        str(export_file),
    ]


def write_inputs(
    out_dir: Path, target: Target, workload: Workload, load: Load, tokenizer: Path, aiperf_venv: Path, seed: int = 7
) -> Path:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer / "tokenizer.json"))
    ids = tok.encode(corpus(aiperf_venv).read_text(), add_special_tokens=False).ids
    entries = synthetic_inputs(ids, tok.decode, workload, load.request_count, seed)
    path = out_dir / INPUTS
    path.write_text(json.dumps(input_data(entries, target.extra_inputs), indent=1) + "\n")
    return path


def run(
    aiperf_venv: Path, target: Target, workload: Workload, load: Load, tokenizer: Path, out_dir: Path, slo: Slo
) -> RunResult:
    """One perf_analyzer run (again, up to CUT_SHORT_RERUNS times, when it cut its export short)."""
    out_dir = out_dir.resolve()  # it runs in out_dir: a relative --out (make bench's) would not be found there
    for attempt in range(CUT_SHORT_RERUNS + 1):
        out_dir.mkdir(parents=True, exist_ok=True)
        input_file = write_inputs(out_dir, target, workload, load, tokenizer, aiperf_venv)
        with open(out_dir / "perf_analyzer.log", "w") as log:
            code = subprocess.call(
                command(target, load, input_file, out_dir / EXPORT),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=tool_env(),
                cwd=out_dir,
            )
        try:
            if code != 0:
                raise RuntimeError(f"perf_analyzer failed ({code}); see {out_dir / 'perf_analyzer.log'}")
            export = json.loads((out_dir / EXPORT).read_text())
        except (RuntimeError, ValueError, OSError):
            if attempt == CUT_SHORT_RERUNS or not export_cut_short(out_dir):
                raise
            warnings.warn(
                f"perf_analyzer wrote a cut-short profile export in {out_dir}; running it again", stacklevel=2
            )
            shutil.rmtree(out_dir)
            continue
        result = parse_export(export, target, workload, load, tokenizer, slo, str(out_dir))
        result.generator = GENERATOR
        return result
    raise AssertionError("unreachable")
