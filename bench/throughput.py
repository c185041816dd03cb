"""Output tokens/s through Triton at a given concurrency (closed loop: `concurrency`
requests always in flight)."""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import asdict, dataclass

from bench.workload import Job, fixed_length_jobs
from client import AsyncLlmClient, GenerationResult
from contract import names


@dataclass(frozen=True)
class ThroughputResult:
    concurrency: int
    requests: int
    output_tokens: int
    seconds: float
    output_tokens_per_s: float
    requests_per_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    itl_p50_s: float
    itl_p99_s: float

    def to_dict(self) -> dict:
        return asdict(self)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


async def run_closed_loop(url: str, jobs: list[Job], concurrency: int, model: str = names.ENSEMBLE) -> ThroughputResult:
    queue = list(jobs)
    results: list[GenerationResult] = []
    async with AsyncLlmClient(url, model=model) as client:

        async def worker():
            while queue:
                job = queue.pop()
                results.append(await client.generate(list(job.messages), job.sampling))

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.monotonic() - t0
    tokens = sum(r.completion_tokens for r in results)
    itls = [x for r in results for x in r.inter_token_latencies_s]
    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    assert len(ttfts) == len(results)  # generate() streams, and a streamed result has its TTFT
    return ThroughputResult(
        concurrency=concurrency,
        requests=len(results),
        output_tokens=tokens,
        seconds=round(elapsed, 3),
        output_tokens_per_s=round(tokens / elapsed, 1),
        requests_per_s=round(len(results) / elapsed, 3),
        ttft_p50_s=round(statistics.median(ttfts), 4),
        ttft_p99_s=round(percentile(ttfts, 0.99), 4),
        itl_p50_s=round(percentile(itls, 0.5), 4),
        itl_p99_s=round(percentile(itls, 0.99), 4),
    )


def sweep(
    url: str, levels: tuple[int, ...], requests_per_level: int | None, output_tokens: int, progress=print
) -> list[dict]:
    """A warm-up, then run_closed_loop at each level (requests_per_level, default 4 x the level and
    at least 8), each row with its speed-up over the first level's output tokens/s."""
    rows = []
    asyncio.run(run_closed_loop(url, fixed_length_jobs(2, 8, seed=99), 2))  # warm-up
    for level in levels:
        n = requests_per_level or max(8, 4 * level)
        result = asyncio.run(run_closed_loop(url, fixed_length_jobs(n, output_tokens, seed=level), level))
        rows.append(result.to_dict())
        progress(
            f"concurrency {level:>3}: {result.output_tokens_per_s:8.1f} output tok/s  "
            f"TTFT p50 {result.ttft_p50_s * 1000:7.1f} ms  ITL p50 {result.itl_p50_s * 1000:6.1f} ms  "
            f"({result.requests} requests, {result.seconds:.1f}s)"
        )
    base = rows[0]["output_tokens_per_s"]
    for row in rows:
        row["speedup_vs_first"] = round(row["output_tokens_per_s"] / base, 2) if base else None
    progress(
        "speed-up vs concurrency %d: %s"
        % (rows[0]["concurrency"], ", ".join(f"c{r['concurrency']}={r['speedup_vs_first']}x" for r in rows))
    )
    return rows
