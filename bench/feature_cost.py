"""The throughput cost of issue 12's features on the served CPU engine, measured the way
DESIGN.md section 6 asks: a light in-process asyncio gRPC load generator, the two sides of
each comparison alternated (A, B, A, B) in one run, the ratio of each pair reported.

    python -m bench.feature_cost --grpc-url 127.0.0.1:8001 --concurrency 16 --rounds 2

Comparisons, all at the same concurrency and output length (min_tokens = max_tokens so every
request makes the same number of tokens):
- n=4 vs n=1: output tokens per second counting every sample (n=4 puts 4 sequences per request
  in the batch; the prompt is prefilled once);
- structured output (a JSON schema, the grammar masks every step's logits) vs free text, both
  running to max_tokens;
- top_logprobs 5 vs log probs alone (the CPU engine scores each such request's tokens with its
  IR a second time: model_repository/engines/openvino/ir_scorer.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import click

from client import AsyncLlmClient, Guide, SamplingParams

PROMPTS = [f"Describe city number {i} in a few sentences." for i in range(64)]  # distinct: no prefix reuse
# A document longer than any answer here (the story's minLength), so every guided answer also
# runs to max_tokens: both sides make the same number of tokens, the grammar mask is the difference.
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "story": {"type": "string", "minLength": 2000}},
    "required": ["name", "story"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Side:
    label: str
    sampling: SamplingParams


async def _throughput(url: str, side: Side, concurrency: int, requests: int) -> float:
    """Output tokens per second of `requests` requests, `concurrency` at a time."""
    async with AsyncLlmClient(url) as client:
        queue = list(range(requests))
        tokens = 0

        async def worker():
            nonlocal tokens
            while queue:
                i = queue.pop()
                results = await client.generate_n(PROMPTS[i % len(PROMPTS)], side.sampling)
                tokens += sum(r.completion_tokens for r in results)

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return tokens / (time.monotonic() - t0)


def comparisons(max_tokens: int) -> list[tuple[Side, Side]]:
    base: dict[str, Any] = dict(max_tokens=max_tokens, min_tokens=max_tokens, temperature=1.0, seed=1)
    return [
        (Side("n=1", SamplingParams(**base)), Side("n=4", SamplingParams(**base, n=4))),
        (
            Side("free text", SamplingParams(**base)),
            Side("json_schema", SamplingParams(**base, guide=Guide.json_schema(SCHEMA))),
        ),
        (
            Side("log probs", SamplingParams(**base, return_log_probs=True)),
            Side("top_logprobs=5", SamplingParams(**base, top_logprobs=5)),
        ),
    ]


@click.command()
@click.option("--grpc-url", default="127.0.0.1:8001")
@click.option("--concurrency", default=16, show_default=True)
@click.option("--requests", default=48, show_default=True)
@click.option("--max-tokens", default=64, show_default=True)
@click.option("--rounds", default=2, show_default=True)
@click.option("--only", type=click.Choice(["all", "n", "json", "top_logprobs"]), default="all", show_default=True)
def main(grpc_url: str, concurrency: int, requests: int, max_tokens: int, rounds: int, only: str) -> None:
    report = []
    pairs = comparisons(max_tokens)
    chosen = {"all": pairs, "n": pairs[:1], "json": pairs[1:2], "top_logprobs": pairs[2:]}[only]
    for a, b in chosen:
        for r in range(rounds):
            ta = asyncio.run(_throughput(grpc_url, a, concurrency, requests))
            tb = asyncio.run(_throughput(grpc_url, b, concurrency, requests))
            report.append(
                {
                    "a": a.label,
                    "b": b.label,
                    "round": r,
                    "a_tok_s": round(ta, 1),
                    "b_tok_s": round(tb, 1),
                    "ratio_b_over_a": round(tb / ta, 3),
                }
            )
            click.echo(json.dumps(report[-1]))


if __name__ == "__main__":
    main()
