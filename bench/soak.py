"""Soak: mixed streaming / non-streaming load against a running server for a set time
(loopback only, bounded in time and concurrency): n > 1, stop words, clients that leave early
or time out, through the ensemble and tensorrt_llm_bls, with NVIDIA's own client and genai-perf
running beside it.  Reports unexpected errors (must be 0), requests that hung (must be 0: each
is bounded by `hang_s`, and a hung load is diagnosed for the Python backend's BLS deadlock),
the server's memory over time (must be flat) and latency percentiles."""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from bench.stress import ServerWatch, deadlocked_bls_stubs
from bench.throughput import percentile
from client import AsyncLlmClient, ChatMessage, SamplingParams
from client.errors import ClientError, RequestTimeout
from contract import names

STOP_WORDS = ("\n", " the", ".")
SERVER_UNCHANGED = "the same tritonserver process throughout, no fatal signal logged"


@dataclass(frozen=True)
class SidePlan:
    """What runs beside the load: NVIDIA's end_to_end_grpc_client.py (a path to the script,
    from a scratch folder: never vendored) and genai-perf (its environment and a tokenizer)."""

    nvidia_client: Path | None = None
    nvidia_period_s: float = 20.0
    genai_perf_venv: Path | None = None
    tokenizer: Path | None = None
    genai_perf_period_s: float = 300.0


@dataclass
class SideRuns:
    ok: int = 0
    failed: list[str] = field(default_factory=list)
    hung: int = 0


@dataclass
class SoakReport:
    duration_s: float
    requests: int = 0
    streamed: int = 0
    whole: int = 0
    samples_n: int = 0  # requests with n > 1
    with_stop_words: int = 0
    cancelled: int = 0
    timeouts: int = 0  # client-side timeouts we asked for (expected)
    hung: list[str] = field(default_factory=list)  # requests without an end after hang_s
    deadlocked_stubs: list[str] = field(default_factory=list)  # BLS stubs in the Python backend's deadlock
    unexpected_errors: list[str] = field(default_factory=list)
    server_problems: list[str] = field(default_factory=list)  # the server died or restarted (bench.stress.ServerWatch)
    models: tuple[str, ...] = ()
    latencies_s: list[float] = field(default_factory=list)
    rss_mib: list[tuple[float, float]] = field(default_factory=list)  # (seconds, MiB of the server's processes)
    nvidia_client: SideRuns = field(default_factory=SideRuns)
    genai_perf: SideRuns = field(default_factory=SideRuns)

    @property
    def rss_growth(self) -> float:
        """Last quarter's mean over the second quarter's mean, minus one (warm-up excluded)."""
        values = [m for _, m in self.rss_mib]
        q = max(1, len(values) // 4)
        early, late = values[q : 2 * q] or values[:1], values[-q:]
        return sum(late) / len(late) / (sum(early) / len(early)) - 1 if values else 0.0

    @property
    def failed(self) -> bool:
        return bool(
            self.unexpected_errors
            or self.server_problems
            or self.hung
            or self.nvidia_client.failed
            or self.nvidia_client.hung
            or self.genai_perf.failed
            or self.genai_perf.hung
            or self.rss_growth > 0.05
        )

    def summary(self) -> dict:
        data = asdict(self)
        data.pop("latencies_s")
        data.update(
            rss_growth=round(self.rss_growth, 4),
            latency_p50_s=round(percentile(self.latencies_s, 0.5), 3),
            latency_p99_s=round(percentile(self.latencies_s, 0.99), 3),
            unexpected_error_count=len(self.unexpected_errors),
        )
        data["unexpected_errors"] = self.unexpected_errors[:20]
        return data


def server_rss_mib(server_pid: int) -> float:
    proc = psutil.Process(server_pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


async def _one(client: AsyncLlmClient, report: SoakReport, rng: random.Random) -> None:
    kind = rng.random()
    messages = [
        ChatMessage(
            "user", f"Soak {rng.randrange(10**6)}: tell me about {rng.choice(['rivers', 'stars', 'bread', 'trains'])}."
        )
    ]
    stop = (rng.choice(STOP_WORDS),) if rng.random() < 0.25 else ()
    sampling = SamplingParams(max_tokens=rng.randint(4, 96), temperature=rng.choice([0.0, 0.7]), stop=stop)
    report.with_stop_words += bool(stop)
    if kind < 0.45:
        async for _ in client.stream(messages, sampling):
            pass
        report.streamed += 1
    elif kind < 0.6:
        await client.generate(messages, sampling, stream=False)
        report.whole += 1
    elif kind < 0.75:  # n samples per prompt (sampling: greedy n > 1 is refused by some engines)
        n = rng.choice([2, 3])
        await client.generate_n(
            messages,
            SamplingParams(max_tokens=rng.randint(4, 48), temperature=0.8, n=n, stop=stop),
            stream=rng.random() < 0.8,
        )
        report.samples_n += 1
    elif kind < 0.9:  # the client walks away mid-answer
        count = 0
        async for _ in client.stream(messages, SamplingParams(max_tokens=200, min_tokens=200)):
            count += 1
            if count == 3:
                break
        report.cancelled += 1
    else:  # a deadline shorter than the answer
        try:
            await client.generate(messages, SamplingParams(max_tokens=200, min_tokens=200), timeout_s=0.3)
        except RequestTimeout:
            report.timeouts += 1


async def _worker(
    clients: list[AsyncLlmClient], report: SoakReport, deadline: float, rng: random.Random, hang_s: float
) -> None:
    while time.monotonic() < deadline:
        client = rng.choice(clients)
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(_one(client, report, rng), hang_s)
            report.latencies_s.append(time.monotonic() - t0)
            report.requests += 1
        except asyncio.TimeoutError:
            report.hung.append(f"{client.model}: no end after {hang_s:g}s")
        except ClientError as e:
            report.unexpected_errors.append(f"{client.model}: {type(e).__name__}: {e}")


def _side_loop(
    name: str, runs: SideRuns, command, period_s: float, timeout_s: float, deadline: float, stop: threading.Event
) -> None:
    """Run `command()` (argv, env or None) every `period_s` until the deadline."""
    while time.monotonic() < deadline and not stop.is_set():
        argv, env = command()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env)
            if done.returncode == 0:
                runs.ok += 1
            else:
                runs.failed.append(f"{name} exited {done.returncode}: {(done.stderr or done.stdout)[-300:]}")
        except subprocess.TimeoutExpired:
            runs.hung += 1
        stop.wait(period_s)


def _nvidia_command(script: Path, grpc_url: str, rng: random.Random):
    def command():
        prompt = f"Soak {rng.randrange(10**6)}: what is a {rng.choice(['river', 'star', 'loaf'])}?"
        return [
            sys.executable,
            str(script),
            "-u",
            grpc_url,
            "--model-name",
            names.LLM_BLS,
            "--streaming",
            "-p",
            prompt,
            "-o",
            str(rng.randint(8, 32)),
        ], None

    return command


def _genai_perf_command(venv: Path, tokenizer: Path, grpc_url: str, out: Path):
    from bench.genai_perf import Endpoint, Load, Target, Workload, command, tool_env

    counter = iter(range(10**6))

    def make():
        target = Target(names.LLM_BLS, Endpoint.TRITON, grpc_url, names.LLM_BLS)
        workload = Workload("soak", input_tokens_mean=32, output_tokens_mean=24, num_prompts=16)
        return command(
            venv, target, workload, Load("concurrency", 4), tokenizer, out / f"genai-perf-{next(counter)}"
        ), tool_env()

    return make


def run_soak(
    grpc_url: str,
    server_pid: int,
    duration_s: float,
    concurrency: int,
    seed: int = 0,
    models: tuple[str, ...] = (names.ENSEMBLE, names.LLM_BLS),
    log_file: Path | None = None,
    side: SidePlan = SidePlan(),
    hang_s: float = 180.0,
    out: Path = Path("build/soak"),
) -> SoakReport:
    """Mixed load through every model of `models`, and what `side` names beside it; with
    `log_file`, also whether the server survived (same process, no fatal signal logged)."""
    report = SoakReport(duration_s=duration_s, models=models)
    watch = ServerWatch.of(server_pid, log_file) if log_file else None
    deadline = time.monotonic() + duration_s
    stop = threading.Event()
    t0 = time.monotonic()

    def sample_memory():
        while not stop.wait(5.0):
            report.rss_mib.append((round(time.monotonic() - t0, 1), round(server_rss_mib(server_pid), 1)))

    threads = [threading.Thread(target=sample_memory, daemon=True)]
    rng = random.Random(seed)
    if side.nvidia_client is not None:
        threads.append(
            threading.Thread(
                target=_side_loop,
                daemon=True,
                args=(
                    "end_to_end_grpc_client.py",
                    report.nvidia_client,
                    _nvidia_command(side.nvidia_client, grpc_url, rng),
                    side.nvidia_period_s,
                    hang_s,
                    deadline,
                    stop,
                ),
            )
        )
    if side.genai_perf_venv is not None and side.tokenizer is not None:
        make = _genai_perf_command(side.genai_perf_venv, side.tokenizer, grpc_url, out)
        threads.append(
            threading.Thread(
                target=_side_loop,
                daemon=True,
                args=(
                    "genai-perf",
                    report.genai_perf,
                    make,
                    side.genai_perf_period_s,
                    max(hang_s, 600.0),
                    deadline,
                    stop,
                ),
            )
        )
    for thread in threads:
        thread.start()

    async def main():
        clients = [AsyncLlmClient(grpc_url, model=model) for model in models]
        try:
            await asyncio.gather(
                *(_worker(clients, report, deadline, random.Random(seed + i), hang_s) for i in range(concurrency))
            )
        finally:
            for c in clients:
                await c.close()

    try:
        asyncio.run(main())
    finally:
        if report.hung:
            report.deadlocked_stubs = deadlocked_bls_stubs(server_pid)
        stop.set()
        for thread in threads:
            thread.join()
    if watch is not None:
        report.server_problems = watch.problems()
    return report


def write_report(report: SoakReport, out: Path, title: str = "") -> Path:
    out.mkdir(parents=True, exist_ok=True)
    summary = report.summary()
    (out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    growth = summary["rss_growth"]
    side = lambda runs: f"{runs.ok} ok, {len(runs.failed)} failed, {runs.hung} hung"  # noqa: E731
    lines = [
        f"# Soak{': ' + title if title else ''}: {report.duration_s / 60:.0f} minutes of mixed load",
        "",
        f"- requests: {report.requests} (streamed {report.streamed}, whole {report.whole}, n > 1 {report.samples_n}, "
        f"with stop words {report.with_stop_words}, abandoned mid-stream {report.cancelled}, "
        f"client timeouts {report.timeouts})",
        f"- entry models: {', '.join(report.models)}",
        f"- hung requests: **{len(report.hung)}**"
        + (f" (BLS deadlock in {', '.join(report.deadlocked_stubs)})" if report.deadlocked_stubs else ""),
        f"- unexpected errors: **{summary['unexpected_error_count']}**",
        f"- NVIDIA's end_to_end_grpc_client.py --model-name tensorrt_llm_bls --streaming: {side(report.nvidia_client)}",
        f"- genai-perf --backend tensorrtllm (tensorrt_llm_bls, streaming): {side(report.genai_perf)}",
        f"- server: **{'; '.join(report.server_problems) or SERVER_UNCHANGED}**",
        f"- server memory (tritonserver + stubs): {report.rss_mib[0][1] if report.rss_mib else 0:.0f} MiB at start, "
        f"{report.rss_mib[-1][1] if report.rss_mib else 0:.0f} MiB at the end; growth after warm-up **{growth:+.1%}** "
        "(limit 5%)",
        f"- latency p50 {summary['latency_p50_s']} s, p99 {summary['latency_p99_s']} s",
        "",
        "| t (s) | RSS (MiB) |",
        "|---:|---:|",
    ] + [f"| {t:.0f} | {m:.0f} |" for t, m in report.rss_mib[:: max(1, len(report.rss_mib) // 20)]]
    path = out / "soak.md"
    path.write_text("\n".join(lines) + "\n")
    return path
