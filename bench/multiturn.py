"""`python -m bench multiturn`: what prefix caching buys a chat service.  Several users hold
conversations of several turns that share one long system prompt; every turn resends the
whole conversation so far (as chat clients do), so from the second turn on most of the prompt
was seen before.  Two servers from the same repository, prefix caching on and off, take the
same conversations in alternating rounds (new users every round); the report gives the time
to first token per turn for both, and their ratio."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from bench.throughput import percentile
from bench.workload import TOPICS
from client import AsyncLlmClient, ChatMessage, SamplingParams
from contract import metrics, names
from serving import prometheus

SYSTEM_SENTENCE = (
    "You are the support assistant of a travel company; answer with concrete places, prices and times, "
    "keep a friendly tone, and never invent bookings. "
)
QUESTIONS = (
    "Tell me about {topic}.",
    "Make that shorter.",
    "Add one surprising fact.",
    "Now give it a title.",
    "Rewrite it for a child.",
    "Summarise everything so far in one line.",
)


@dataclass(frozen=True)
class TurnTiming:
    user: int
    turn: int
    prompt_chars: int
    ttft_s: float


def system_prompt(sentences: int = 12) -> str:
    return SYSTEM_SENTENCE * sentences  # ~360 tokens at 12 sentences


async def _conversation(
    client: AsyncLlmClient, user: int, seed: int, turns: int, answer_tokens: int, system: str
) -> list[TurnTiming]:
    topic = random.Random(seed * 1000 + user).choice(TOPICS)
    messages = [ChatMessage("system", system)]
    out = []
    sampling = SamplingParams(max_tokens=answer_tokens, min_tokens=answer_tokens, temperature=0.0)
    for turn in range(turns):
        question = QUESTIONS[turn % len(QUESTIONS)].format(topic=topic)
        messages.append(ChatMessage("user", f"[user {seed}-{user}] {question}" if turn == 0 else question))
        result = await client.generate(list(messages), sampling)
        assert result.ttft_s is not None  # streamed
        out.append(TurnTiming(user, turn, sum(len(m.content) for m in messages), result.ttft_s))
        messages.append(ChatMessage("assistant", result.text))
    return out


async def run_round(url: str, users: int, turns: int, answer_tokens: int, seed: int, system: str) -> list[TurnTiming]:
    """`users` conversations at once, each turn after the previous answer."""
    async with AsyncLlmClient(url) as client:
        per_user = await asyncio.gather(
            *(_conversation(client, u, seed, turns, answer_tokens, system) for u in range(users))
        )
    return [t for timings in per_user for t in timings]


@dataclass(frozen=True)
class TurnRow:
    turn: int
    cached_p50_s: float
    cached_p99_s: float
    uncached_p50_s: float
    uncached_p99_s: float

    @property
    def speedup_p50(self) -> float:
        return self.uncached_p50_s / self.cached_p50_s if self.cached_p50_s else float("nan")


def turn_rows(cached: list[TurnTiming], uncached: list[TurnTiming]) -> list[TurnRow]:
    rows = []
    for turn in sorted({t.turn for t in cached}):
        a = [t.ttft_s for t in cached if t.turn == turn]
        b = [t.ttft_s for t in uncached if t.turn == turn]
        rows.append(TurnRow(turn, statistics.median(a), percentile(a, 0.99), statistics.median(b), percentile(b, 0.99)))
    return rows


def markdown(rows: list[TurnRow], hit_rate: float | None = None) -> list[str]:
    lines = [
        "| turn | TTFT p50 cached / uncached ms | TTFT p99 cached / uncached ms | p50 uncached / cached |",
        "|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.turn + 1} | {r.cached_p50_s * 1000:.0f} / {r.uncached_p50_s * 1000:.0f} | "
            f"{r.cached_p99_s * 1000:.0f} / {r.uncached_p99_s * 1000:.0f} | **{r.speedup_p50:.1f}x** |"
        )
    if hit_rate is not None:
        lines += [
            "",
            f"Prefix-cache hit rate on the caching server (prompt tokens served from the cache): {hit_rate:.0%}",
        ]
    return lines


def run(
    repository: Path, out: Path, users: int, turns: int, answer_tokens: int, rounds: int, progress=print
) -> tuple[list[TurnRow], float | None]:
    """Two servers (prefix caching on / off) from copies of `repository`, rounds alternating."""
    from build_engines.render import copy_repository
    from serving.launcher import ServerSettings, TritonServer

    out.mkdir(parents=True, exist_ok=True)
    repos = {
        cached: copy_repository(
            repository,
            out / ("repository-cached" if cached else "repository-uncached"),
            names.OPENVINO_ENGINE,
            {"enable_prefix_caching": str(cached).lower()},
        )
        for cached in (True, False)
    }
    system = system_prompt()
    timings: dict[bool, list[TurnTiming]] = {True: [], False: []}
    with (
        TritonServer(ServerSettings.on_free_ports(repos[True], out / "tritonserver-cached.log")) as on,
        TritonServer(ServerSettings.on_free_ports(repos[False], out / "tritonserver-uncached.log")) as off,
    ):
        servers = {True: on, False: off}
        for r in range(rounds):
            for cached in (True, False) if r % 2 == 0 else (False, True):
                t0 = time.monotonic()
                timings[cached] += asyncio.run(
                    run_round(servers[cached].settings.grpc_url, users, turns, answer_tokens, 100 + r, system)
                )
                progress(f"  round {r} prefix caching {'on ' if cached else 'off'}: {time.monotonic() - t0:5.1f} s")
        hit_rate = _hit_rate(on.settings.metrics_url)
    return turn_rows(timings[True], timings[False]), hit_rate


def _hit_rate(metrics_url: str) -> float | None:
    samples = prometheus.scrape(metrics_url)
    queried = prometheus.value(samples, metrics.PREFIX_CACHE_QUERIES.name)
    return prometheus.value(samples, metrics.PREFIX_CACHE_HITS.name) / queried if queried else None
