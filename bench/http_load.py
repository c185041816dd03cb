"""The same closed-loop load, through the `openai` package, against any OpenAI-compatible
server: our front and the peer are measured by one client with the same prompts."""

from __future__ import annotations

import asyncio
import time

import openai

from bench.genai_perf import RunResult, Slo, percentiles


async def _one(
    client: openai.AsyncOpenAI, model: str, prompt: str, max_tokens: int, extra_body: dict | None
) -> tuple[float, float, float, int]:
    """(ttft, itl, latency, tokens) of one streamed chat completion."""
    t0 = time.monotonic()
    first = last = None
    tokens = 0
    stream = await client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=max_tokens,
        stream=True,
        temperature=0,
        stream_options={"include_usage": True},
        extra_body=extra_body,
    )
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            now = time.monotonic()
            first = first or now
            last = now
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
    end = time.monotonic()
    if first is None:
        return float("nan"), 0.0, end - t0, tokens
    assert last is not None  # set with first
    itl = (last - first) / (tokens - 1) if tokens > 1 else 0.0
    return first - t0, itl, end - t0, tokens


async def _run(
    base_url: str, model: str, prompts: list[str], max_tokens: int, concurrency: int, extra_body: dict | None
):
    # A new connection per request for every server alike: llama.cpp's server may close a
    # kept-alive connection after a stream just as the client reuses it.
    import httpx2

    http = openai.DefaultAsyncHttpx2Client(limits=httpx2.Limits(max_keepalive_connections=0), timeout=600)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=600, http_client=http)
    queue = list(reversed(prompts))
    results = []

    async def worker():
        while queue:
            results.append(await _one(client, model, queue.pop(), max_tokens, extra_body))

    t0 = time.monotonic()
    try:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await client.close()
    return results, time.monotonic() - t0


def run_http(
    name: str,
    base_url: str,
    model: str,
    prompts: list[str],
    max_tokens: int,
    concurrency: int,
    slo: Slo,
    workload: str,
    extra_body: dict | None = None,
) -> RunResult:
    """`extra_body`: server-specific request fields (e.g. ignore_eos for fixed-length answers)."""
    results, seconds = asyncio.run(_run(base_url, model, prompts, max_tokens, concurrency, extra_body))
    ttfts = [r[0] for r in results if r[0] == r[0]]
    itls = [r[1] for r in results]
    tokens = sum(r[3] for r in results)
    met = sum(1 for r in results if r[0] == r[0] and r[0] <= slo.ttft_s and r[1] <= slo.itl_s)
    return RunResult(
        target=name,
        workload=workload,
        load=f"c{concurrency}",
        requests=len(results),
        seconds=round(seconds, 3),
        output_tokens=tokens,
        output_tokens_per_s=round(tokens / seconds, 1),
        requests_per_s=round(len(results) / seconds, 3),
        goodput_rps=round(met / seconds, 3),
        slo_met_fraction=round(met / len(results), 3) if results else 0.0,
        ttft_s=percentiles(ttfts),
        itl_s=percentiles(itls),
        latency_s=percentiles([r[2] for r in results]),
        ttfts_s=sorted(round(t, 4) for t in ttfts),
        generator="bench.http_load (OpenAI SDK, in-process)",
    )
