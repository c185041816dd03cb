"""Soak: mixed streaming / non-streaming load with cancellations against a running server
for a set time (loopback only, bounded in time and concurrency).  Reports unexpected errors
(must be 0), the server's memory over time (must be flat) and latency percentiles."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from bench.stress import ServerWatch
from bench.throughput import percentile
from client import AsyncLlmClient, ChatMessage, SamplingParams
from client.errors import ClientError, RequestTimeout
from contract import names


@dataclass
class SoakReport:
    duration_s: float
    requests: int = 0
    streamed: int = 0
    whole: int = 0
    cancelled: int = 0
    timeouts: int = 0  # client-side timeouts we asked for (expected)
    unexpected_errors: list[str] = field(default_factory=list)
    server_problems: list[str] = field(default_factory=list)  # the server died or restarted (bench.stress.ServerWatch)
    models: tuple[str, ...] = ()
    latencies_s: list[float] = field(default_factory=list)
    rss_mib: list[tuple[float, float]] = field(default_factory=list)  # (seconds, MiB of the server's processes)

    @property
    def rss_growth(self) -> float:
        """Last quarter's mean over the second quarter's mean, minus one (warm-up excluded)."""
        values = [m for _, m in self.rss_mib]
        q = max(1, len(values) // 4)
        early, late = values[q:2 * q] or values[:1], values[-q:]
        return sum(late) / len(late) / (sum(early) / len(early)) - 1 if values else 0.0

    def summary(self) -> dict:
        data = asdict(self)
        data.pop("latencies_s")
        data.update(rss_growth=round(self.rss_growth, 4), latency_p50_s=round(percentile(self.latencies_s, 0.5), 3),
                    latency_p99_s=round(percentile(self.latencies_s, 0.99), 3),
                    unexpected_error_count=len(self.unexpected_errors))
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


async def _worker(clients: list[AsyncLlmClient], report: SoakReport, deadline: float, rng: random.Random) -> None:
    while time.monotonic() < deadline:
        client = rng.choice(clients)
        kind = rng.random()
        messages = [ChatMessage("user", f"Soak {rng.randrange(10**6)}: tell me about {rng.choice(['rivers', 'stars', 'bread', 'trains'])}.")]
        sampling = SamplingParams(max_tokens=rng.randint(4, 96), temperature=rng.choice([0.0, 0.7]), seed=rng.randrange(1000))
        t0 = time.monotonic()
        try:
            if kind < 0.6:
                async for _ in client.stream(messages, sampling):
                    pass
                report.streamed += 1
            elif kind < 0.8:
                await client.generate(messages, sampling, stream=False)
                report.whole += 1
            elif kind < 0.9:  # the client walks away mid-answer
                n = 0
                async for _ in client.stream(messages, SamplingParams(max_tokens=200, min_tokens=200)):
                    n += 1
                    if n == 3:
                        break
                report.cancelled += 1
            else:  # a deadline shorter than the answer
                try:
                    await client.generate(messages, SamplingParams(max_tokens=200, min_tokens=200), timeout_s=0.3)
                except RequestTimeout:
                    report.timeouts += 1
            report.latencies_s.append(time.monotonic() - t0)
            report.requests += 1
        except ClientError as e:
            report.unexpected_errors.append(f"{type(e).__name__}: {e}")


def run_soak(grpc_url: str, server_pid: int, duration_s: float, concurrency: int, seed: int = 0,
             models: tuple[str, ...] = (names.ENSEMBLE, names.LLM_BLS), log_file: Path | None = None) -> SoakReport:
    """Mixed load through every model of `models`; with `log_file`, also whether the server
    survived (same process, no fatal signal logged)."""
    report = SoakReport(duration_s=duration_s, models=models)
    watch = ServerWatch.of(server_pid, log_file) if log_file else None
    deadline = time.monotonic() + duration_s
    stop = threading.Event()
    t0 = time.monotonic()

    def sample_memory():
        while not stop.wait(5.0):
            report.rss_mib.append((round(time.monotonic() - t0, 1), round(server_rss_mib(server_pid), 1)))

    sampler = threading.Thread(target=sample_memory, daemon=True)
    sampler.start()

    async def main():
        clients = [AsyncLlmClient(grpc_url, model=model) for model in models]
        try:
            await asyncio.gather(*(_worker(clients, report, deadline, random.Random(seed + i)) for i in range(concurrency)))
        finally:
            for c in clients:
                await c.close()

    try:
        asyncio.run(main())
    finally:
        stop.set()
        sampler.join()
    if watch is not None:
        report.server_problems = watch.problems()
    return report


def write_report(report: SoakReport, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    summary = report.summary()
    (out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n")
    growth = summary["rss_growth"]
    lines = [
        f"# Soak: {report.duration_s / 60:.0f} minutes of mixed load", "",
        f"- requests: {report.requests} (streamed {report.streamed}, whole {report.whole}, "
        f"abandoned mid-stream {report.cancelled}, client timeouts {report.timeouts})",
        f"- entry models: {', '.join(report.models)}",
        f"- unexpected errors: **{summary['unexpected_error_count']}**",
        f"- server: **{'; '.join(report.server_problems) or 'the same tritonserver process throughout, no fatal signal logged'}**",
        f"- server memory (tritonserver + stubs): {report.rss_mib[0][1] if report.rss_mib else 0:.0f} MiB at start, "
        f"{report.rss_mib[-1][1] if report.rss_mib else 0:.0f} MiB at the end; growth after warm-up **{growth:+.1%}** (limit 5%)",
        f"- latency p50 {summary['latency_p50_s']} s, p99 {summary['latency_p99_s']} s", "",
        "| t (s) | RSS (MiB) |", "|---:|---:|",
    ] + [f"| {t:.0f} | {m:.0f} |" for t, m in report.rss_mib[:: max(1, len(report.rss_mib) // 20)]]
    path = out / "soak.md"
    path.write_text("\n".join(lines) + "\n")
    return path
