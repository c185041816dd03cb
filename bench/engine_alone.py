"""One stream's decoding by the engines alone, no server: our CPU engine driven in-process
(bench/offline.py: the pipeline object the served engine steps) against llama.cpp's own
benchmark, `llama-bench` (its `tg` test: N tokens generated after a context of P tokens, timed
without the prompt), in pairs whose order alternates.

Beside `bench peers`' served pairs it splits the served ratio in two: the engines' share (this)
and the servers' (served ratio / engine ratio: above 1 where our serving stack costs less than
llama.cpp's server)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.offline import OfflineResult, run_offline
from contract.model_configs import OpenVinoEngineParameters


@dataclass(frozen=True)
class EnginePair:
    round: int
    ours_tok_s: float  # decode only: tokens after the first over the time after the first
    llama_bench_tok_s: float

    @property
    def ratio(self) -> float:
        return self.ours_tok_s / self.llama_bench_tok_s if self.llama_bench_tok_s else float("nan")


def llama_bench_command(
    binary: Path, gguf: Path, prompt_tokens: int, output_tokens: int, threads: int | None = None
) -> list[str]:
    """One `tg` run at depth `prompt_tokens` (-p 0: no separate prompt test), as many threads as
    llama.cpp's server gets here (bench/peer.py)."""
    threads = threads or len(os.sched_getaffinity(0))
    return [
        str(binary),
        "-m",
        str(gguf),
        "-p",
        "0",
        "-n",
        str(output_tokens),
        "-d",
        str(prompt_tokens),
        "-t",
        str(threads),
        "-r",
        "1",
        "-o",
        "json",
    ]


def parse_llama_bench(stdout: str) -> float:
    """Tokens/s of the (only) test in llama-bench's JSON output."""
    tests = json.loads(stdout)
    if len(tests) != 1 or "avg_ts" not in tests[0]:
        raise ValueError(f"llama-bench printed {len(tests)} tests, expected one with avg_ts")
    return float(tests[0]["avg_ts"])


def decode_tok_s(result: OfflineResult) -> float:
    """One request's decoding speed: the tokens after the first over the time after the first,
    as llama-bench's tg test leaves the prompt out."""
    return (result.output_tokens - 1) / (result.seconds - result.ttft_p50_s)


def measure(
    params: OpenVinoEngineParameters,
    llama_bench: Path,
    gguf: Path,
    *,
    prompt_tokens: int = 64,
    output_tokens: int = 128,
    rounds: int = 3,
    progress=print,
) -> list[EnginePair]:
    """Each round: ours on a new random prompt of `prompt_tokens` ids (llama-bench fills its
    context with random tokens too), llama-bench once; the first side alternates."""
    pairs = []
    for r in range(rounds):
        prompt = np.random.default_rng(700 + r).integers(100, 10000, prompt_tokens).tolist()

        def ours(prompt: list[int] = prompt) -> float:
            return decode_tok_s(run_offline(params, [prompt], output_tokens, 1))

        def theirs() -> float:
            done = subprocess.run(
                llama_bench_command(llama_bench, gguf, prompt_tokens, output_tokens),
                check=True,
                capture_output=True,
                text=True,
            )
            return parse_llama_bench(done.stdout)

        if r % 2 == 0:
            a = ours()
            b = theirs()
        else:
            b = theirs()
            a = ours()
        pairs.append(EnginePair(r, round(a, 1), round(b, 1)))
        progress(
            f"  engines alone, one stream, round {r}: ours {a:.1f} tok/s, llama-bench {b:.1f} tok/s "
            f"-> {pairs[-1].ratio:.2f}x"
        )
    return pairs


def markdown(
    pairs: list[EnginePair], served_c1_ratio: float | None, gguf: Path, prompt_tokens: int, output_tokens: int
) -> list[str]:
    """The engines' table, and how the served ratio splits into the engines' and the servers' parts."""
    engine = statistics.median(p.ratio for p in pairs)
    lines = [
        f"Our CPU engine in-process (bench/offline.py) vs `llama-bench` on {gguf.name} (tg{output_tokens} "
        f"after {prompt_tokens} tokens of context, as many threads as its server), decode tok/s, order alternating:",
        "",
        "| round | ours | llama-bench | ours / llama-bench |",
        "|---:|---:|---:|---:|",
        *[f"| {p.round} | {p.ours_tok_s:.1f} | {p.llama_bench_tok_s:.1f} | {p.ratio:.2f} |" for p in pairs],
        "",
        f"- engines alone: ours/llama.cpp **{engine:.2f}x** (median of {len(pairs)} pairs)",
    ]
    if served_c1_ratio is not None:
        servers = served_c1_ratio / engine
        said = (
            "our serving stack costs relatively less than llama.cpp's server"
            if servers > 1.05
            else "our serving stack costs relatively more than llama.cpp's server"
            if servers < 0.95
            else "the two serving stacks cost about the same, relatively"
        )
        lines.append(
            f"- served at concurrency 1: {served_c1_ratio:.2f}x, so the servers' share is {servers:.2f}x ({said})"
        )
    return lines
