"""`python -m bench cluster`: what Dynamo's KV-aware routing buys two replicas, and what the extra
hop costs.

Routing: two replicas of one repository (cluster/), and two Dynamo frontends beside each other
that discover the same workers - one routing by KV-cache overlap (the router's approximate mode:
the CPU engine reports no cache events), one round-robin.  Both take the same workload in
alternating rounds: users hold multi-turn conversations that share one long system prompt and
resend the whole conversation every turn (bench/multiturn.py's), new users every round so no
round finds another's cache.  Per round: TTFT of every turn (from the client), output tokens per
second, and the prefix-cache hit rate the replicas themselves count (llm_prefix_cache_*).

The hop: one replica behind Dynamo's frontend + the kit's worker, against the kit's own OpenAI
front on the same replica, at 1 and 16 streams, alternating (bench/http_load.py: one client, the
same prompts)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

from bench.genai_perf import Slo, percentile
from bench.http_load import run_http
from bench.multiturn import QUESTIONS, system_prompt
from bench.peer_compare import prompts
from bench.workload import TOPICS
from cluster.keeper import Keeper
from cluster.launcher import Cluster, free_base_port, model_listed
from cluster.topology import ClusterSpec, RouterMode
from contract import metrics
from serving import ports, prometheus
from serving.openai_process import OpenAiFront, served_model_name, served_tokenizer_dir

MODES = (RouterMode.KV, RouterMode.ROUND_ROBIN)


@dataclass(frozen=True)
class RoutingRound:
    mode: str
    round: int
    ttfts_s: list[float]  # every turn of every user
    later_ttfts_s: list[float]  # turns 2.. (their prefix was seen before)
    output_tokens: int
    seconds: float
    prefix_hits: float
    prefix_queries: float

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds

    @property
    def hit_rate(self) -> float:
        return self.prefix_hits / self.prefix_queries if self.prefix_queries else 0.0


def user_context(seed: int, sentences: int) -> str:
    """A user's own long context (the document or code a session keeps talking about), distinct
    per user: what only the replica that served the session's earlier turns holds."""
    rng = random.Random(seed)
    return " ".join(
        f"Note {i}: {rng.choice(TOPICS)} met {rng.choice(TOPICS)} at {rng.randrange(24):02d}:{rng.randrange(60):02d}."
        for i in range(sentences)
    )


@dataclass(frozen=True)
class Workload:
    users: int = 8  # conversations at once
    turns: int = 4
    answer_tokens: int = 32
    context_sentences: int = 40  # each user's own notes (~600 tokens), sent with every turn
    system: str = system_prompt(4)  # one system prompt every user shares (~120 tokens)


async def _conversation(
    client: openai.AsyncOpenAI, model: str, label: str, seed: int, work: Workload
) -> tuple[list[tuple[int, float]], int]:
    topic = random.Random(seed).choice(TOPICS)
    messages: list[Any] = [{"role": "system", "content": work.system}]  # the SDK's message params
    if work.context_sentences:
        notes = user_context(seed, work.context_sentences)
        messages += [
            {"role": "user", "content": f"[{label}] Keep these notes in mind. {notes}"},
            {"role": "assistant", "content": "Noted."},
        ]
    ttfts, tokens = [], 0
    for turn in range(work.turns):
        messages.append({"role": "user", "content": QUESTIONS[turn % len(QUESTIONS)].format(topic=topic)})
        t0 = time.monotonic()
        first, text = None, []
        stream = await client.chat.completions.create(
            model=model,
            messages=messages,
            max_tokens=work.answer_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or time.monotonic()
                text.append(chunk.choices[0].delta.content)
            if chunk.usage:
                tokens += chunk.usage.completion_tokens
        ttfts.append((turn, (first or time.monotonic()) - t0))
        messages.append({"role": "assistant", "content": "".join(text)})
    return ttfts, tokens


def _prefix_counts(cluster: Cluster) -> tuple[float, float]:
    hits = queries = 0.0
    for index in cluster.replicas:
        samples = prometheus.scrape(f"http://{cluster.spec.host}:{cluster.spec.ports(index).metrics}/metrics")
        hits += prometheus.value(samples, metrics.PREFIX_CACHE_HITS.name)
        queries += prometheus.value(samples, metrics.PREFIX_CACHE_QUERIES.name)
    return hits, queries


def routing_round(cluster: Cluster, url: str, mode: str, round_: int, work: Workload) -> RoutingRound:
    """One round of `work` through the frontend at `url`: new users (seeds of this round and mode)."""
    first_seed = 1000 * round_ + 100 * [m.value for m in MODES].index(mode)

    async def run():
        async with openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=600) as client:
            return await asyncio.gather(
                *(
                    _conversation(client, cluster.spec.model_name, f"{mode} r{round_} u{u}", first_seed + u, work)
                    for u in range(work.users)
                )
            )

    hits0, queries0 = _prefix_counts(cluster)
    t0 = time.monotonic()
    conversations = asyncio.run(run())
    seconds = time.monotonic() - t0
    time.sleep(1.0)  # the engines publish their counters a moment after a request ends
    hits1, queries1 = _prefix_counts(cluster)
    ttfts = [(turn, t) for timings, _ in conversations for turn, t in timings]
    return RoutingRound(
        mode,
        round_,
        [t for _, t in ttfts],
        [t for turn, t in ttfts if turn],
        sum(tokens for _, tokens in conversations),
        seconds,
        hits1 - hits0,
        queries1 - queries0,
    )


def summary(rounds: list[RoutingRound]) -> dict:
    out: dict = {}
    for mode in {r.mode for r in rounds}:
        mine = [r for r in rounds if r.mode == mode]
        all_ttfts = [t for r in mine for t in r.ttfts_s]
        later = [t for r in mine for t in r.later_ttfts_s]
        out[mode] = {
            "ttft_p50_s": round(statistics.median(all_ttfts), 4),
            "ttft_p99_s": round(percentile(all_ttfts, 0.99), 4),
            "later_turns_ttft_p50_s": round(statistics.median(later), 4),
            "later_turns_ttft_p99_s": round(percentile(later, 0.99), 4),
            "output_tokens_per_s": round(sum(r.output_tokens for r in mine) / sum(r.seconds for r in mine), 1),
            "prefix_hit_rate": round(
                sum(r.prefix_hits for r in mine) / max(1.0, sum(r.prefix_queries for r in mine)), 3
            ),
        }
    return out


def pair_ratios(rounds: list[RoutingRound]) -> list[dict]:
    """Per alternating pair (the same round number): round-robin / KV for TTFT p50, KV / round-robin
    for throughput."""
    by_round: dict[int, dict[str, RoutingRound]] = {}
    for r in rounds:
        by_round.setdefault(r.round, {})[r.mode] = r
    out = []
    for n, pair in sorted(by_round.items()):
        kv, rr = pair[RouterMode.KV.value], pair[RouterMode.ROUND_ROBIN.value]
        out.append(
            {
                "round": n,
                "ttft_p50_rr_over_kv": round(statistics.median(rr.ttfts_s) / statistics.median(kv.ttfts_s), 3),
                "throughput_kv_over_rr": round(kv.tokens_per_s / rr.tokens_per_s, 3),
                "hit_rate_kv": round(kv.hit_rate, 3),
                "hit_rate_rr": round(rr.hit_rate, 3),
            }
        )
    return out


def hop_cost(
    cluster: Cluster, front_url: str, levels: tuple[int, ...], pairs: int, output_tokens: int, progress=print
) -> list[dict]:
    """Dynamo's frontend + worker vs the kit's own front, to the same one replica, alternating."""
    slo = Slo(ttft_s=1.0, itl_s=0.1)
    targets = {"dynamo": cluster.spec.frontend_url + "/v1", "kit front": front_url + "/v1"}
    rows = []
    for level in levels:
        for n in range(pairs):
            order = list(targets) if n % 2 == 0 else list(reversed(targets))
            texts = prompts(max(8, 2 * level), seed=n)  # the same prompts for both sides of the pair
            results = {}
            for name in order:
                results[name] = run_http(
                    name,
                    targets[name],
                    cluster.spec.model_name,
                    texts,
                    output_tokens,
                    level,
                    slo,
                    "hop",
                    extra_body={"ignore_eos": True},
                )
            d, k = results["dynamo"], results["kit front"]
            rows.append(
                {
                    "concurrency": level,
                    "pair": n,
                    "dynamo_tok_s": d.output_tokens_per_s,
                    "kit_front_tok_s": k.output_tokens_per_s,
                    "dynamo_over_kit_front": round(d.output_tokens_per_s / k.output_tokens_per_s, 3),
                    "dynamo_ttft_p50_s": d.ttft_s["p50"],
                    "kit_front_ttft_p50_s": k.ttft_s["p50"],
                }
            )
            progress(
                f"  hop c{level} pair {n}: dynamo {d.output_tokens_per_s} tok/s, "
                f"kit front {k.output_tokens_per_s} tok/s"
            )
    return rows


def run(
    repository: Path,
    dynamo_python: Path,
    out: Path,
    work: Workload = Workload(),
    rounds: int = 4,
    hop_levels: tuple[int, ...] = (1, 16),
    hop_pairs: int = 2,
    hop_tokens: int = 64,
    progress=print,
) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    model = served_model_name(repository)
    spec = ClusterSpec(
        repository=repository,
        model_name=model,
        replicas=2,
        frontend_port=ports.free_loopback_port(),
        base_port=free_base_port(2),
        state_dir=out / "cluster",
        dynamo_python=dynamo_python,
    )
    second = dataclasses.replace(spec, router_mode=RouterMode.ROUND_ROBIN, frontend_port=ports.free_loopback_port())
    report: dict = {"repository": str(repository), "workload": dataclasses.asdict(work), "rounds": rounds}
    with Cluster(spec, report=progress) as cluster:
        round_robin = Keeper(second.frontend("frontend-round-robin"), report=progress)
        round_robin.start()
        try:
            cluster.wait_ready()
            _wait_models(second.frontend_url, model)
            urls = {RouterMode.KV.value: spec.frontend_url, RouterMode.ROUND_ROBIN.value: second.frontend_url}
            warm = dataclasses.replace(work, users=2, turns=1, answer_tokens=4, context_sentences=0)
            for mode, url in urls.items():  # the replicas' first requests (compilation, allocations) untimed
                routing_round(cluster, url, mode, -1, warm)
            results: list[RoutingRound] = []
            for n in range(rounds):
                for mode in list(urls) if n % 2 == 0 else list(reversed(urls)):
                    results.append(routing_round(cluster, urls[mode], mode, n, work))
                    r = results[-1]
                    progress(
                        f"  round {n} {mode:11s}: TTFT p50 {statistics.median(r.ttfts_s) * 1000:.0f} ms, "
                        f"{r.tokens_per_s:.0f} tok/s, prefix hits {r.hit_rate:.0%}"
                    )
        finally:
            round_robin.stop()
        report["routing"] = {
            "summary": summary(results),
            "pairs": pair_ratios(results),
            "rounds": [dataclasses.asdict(r) for r in results],
        }
        cluster.remove_replica(1)  # the hop: one replica, Dynamo's path vs ours
        cluster.wait_ready(instances=1)
        front = OpenAiFront(
            f"{spec.host}:{spec.ports(0).grpc}",
            spec.host,
            ports.free_loopback_port(),
            model,
            out / "openai_front.log",
            tokenizer_dir=served_tokenizer_dir(repository),
        )
        front.start()
        try:
            report["hop"] = hop_cost(cluster, front.url, hop_levels, hop_pairs, hop_tokens, progress)
        finally:
            front.stop()
    (out / "results.json").write_text(json.dumps(report, indent=1))
    (out / "report.md").write_text("\n".join(markdown(report)) + "\n")
    return report


def _wait_models(url: str, model: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not model_listed(url, model):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not list {model} in {timeout_s:.0f}s")
        time.sleep(0.25)


def markdown(report: dict) -> list[str]:
    s, w = report["routing"]["summary"], report["workload"]
    lines = [
        f"{w['users']} users at once, {w['turns']} turns each, {w['answer_tokens']}-token answers; each user's own "
        f"notes ({w['context_sentences']} sentences) and one shared system prompt resent every turn; two replicas; "
        f"{report['rounds']} rounds per routing mode, alternating, new users every round:",
        "",
        "| routing | TTFT p50 / p99 ms (all turns) | TTFT p50 / p99 ms (turns 2+) | output tok/s | prefix hit rate |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode in (m.value for m in MODES):
        r = s[mode]
        lines.append(
            f"| {mode} | {r['ttft_p50_s'] * 1000:.0f} / {r['ttft_p99_s'] * 1000:.0f} | "
            f"{r['later_turns_ttft_p50_s'] * 1000:.0f} / {r['later_turns_ttft_p99_s'] * 1000:.0f} | "
            f"{r['output_tokens_per_s']:.0f} | {r['prefix_hit_rate']:.0%} |"
        )
    lines += [
        "",
        "| pair | TTFT p50 round-robin / KV | throughput KV / round-robin | hit rate KV / RR |",
        "|---:|---:|---:|---:|",
    ]
    for p in report["routing"]["pairs"]:
        lines.append(
            f"| {p['round']} | {p['ttft_p50_rr_over_kv']:.2f}x | {p['throughput_kv_over_rr']:.2f}x | "
            f"{p['hit_rate_kv']:.0%} / {p['hit_rate_rr']:.0%} |"
        )
    if report.get("hop"):
        lines += [
            "",
            "The extra hop (one replica): Dynamo's frontend + the kit's worker / the kit's OpenAI front",
            "",
            "| streams | pair | Dynamo tok/s | kit front tok/s | ratio | TTFT p50 ms Dynamo / kit |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for h in report["hop"]:
            lines.append(
                f"| {h['concurrency']} | {h['pair']} | {h['dynamo_tok_s']:.0f} | {h['kit_front_tok_s']:.0f} | "
                f"{h['dynamo_over_kit_front']:.2f}x | {h['dynamo_ttft_p50_s'] * 1000:.0f} / "
                f"{h['kit_front_ttft_p50_s'] * 1000:.0f} |"
            )
    return lines
