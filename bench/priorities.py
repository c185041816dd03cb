"""`python -m bench priorities`: what request priorities buy interactive users while batch
traffic keeps the engine full.  Batch clients keep `batch_clients` long generations in flight
(more than the engine's `max_num_seqs`, so some always wait); interactive users send short
chats at random times.  The same server takes two kinds of phase, alternating: with
priorities (interactive 0.9, batch 0.1) and without (no priority sent: arrival order).  The
report gives the interactive time to first token (p50/p99, against the SLO) and the batch
output tok/s of each kind; the engine's `priority_aging_per_s` stays at its default."""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.throughput import percentile
from bench.workload import TOPICS
from client import AsyncLlmClient, ChatMessage, SamplingParams
from contract import names

INTERACTIVE_PRIORITY, BATCH_PRIORITY = 0.9, 0.1


@dataclass
class Phase:
    priorities: bool
    seconds: float = 0.0
    interactive_ttft_s: list[float] = field(default_factory=list)
    batch_tokens: int = 0

    @property
    def batch_tok_s(self) -> float:
        return self.batch_tokens / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class Workload:
    batch_clients: int = 12
    batch_tokens: int = 192
    interactive_rate: float = 0.5  # requests per second (Poisson arrivals)
    interactive_tokens: int = 24
    phase_s: float = 40.0


async def _batch_client(client: AsyncLlmClient, phase: Phase, until: float, w: Workload, k: int) -> None:
    priority = BATCH_PRIORITY if phase.priorities else None
    sampling = SamplingParams(max_tokens=w.batch_tokens, min_tokens=w.batch_tokens, temperature=0.0, priority=priority)
    n = 0
    while time.monotonic() < until:
        prompt = f"[batch {k}-{n}] Write a long report about {TOPICS[(k + n) % len(TOPICS)]}."
        result = await client.generate(prompt, sampling)
        if time.monotonic() <= until:  # count only what finished inside the phase
            phase.batch_tokens += result.completion_tokens
        n += 1


async def _interactive(client: AsyncLlmClient, phase: Phase, until: float, w: Workload, seed: int) -> None:
    rng = random.Random(seed)
    priority = INTERACTIVE_PRIORITY if phase.priorities else None
    sampling = SamplingParams(max_tokens=w.interactive_tokens, temperature=0.0, priority=priority)

    async def one(i: int) -> None:
        question = [ChatMessage("user", f"[{seed}-{i}] In one sentence, what is {rng.choice(TOPICS)}?")]
        result = await client.generate(question, sampling)
        assert result.ttft_s is not None  # streamed
        phase.interactive_ttft_s.append(result.ttft_s)

    tasks, i = [], 0
    while True:
        await asyncio.sleep(rng.expovariate(w.interactive_rate))
        if time.monotonic() >= until:
            break
        tasks.append(asyncio.create_task(one(i)))
        i += 1
    await asyncio.gather(*tasks)


async def run_phase(url: str, priorities: bool, w: Workload, seed: int) -> Phase:
    phase = Phase(priorities)
    async with AsyncLlmClient(url) as client:
        t0 = time.monotonic()
        until = t0 + w.phase_s
        batch = [asyncio.create_task(_batch_client(client, phase, until, w, k)) for k in range(w.batch_clients)]
        await asyncio.sleep(3.0)  # the engine fills before the first interactive user arrives
        await _interactive(client, phase, until, w, seed)
        phase.seconds = time.monotonic() - t0
        await asyncio.gather(*batch)  # the last batch answers finish (not counted)
    return phase


@dataclass(frozen=True)
class Row:
    priorities: bool
    phases: int
    interactive: int
    ttft_p50_s: float
    ttft_p99_s: float
    batch_tok_s: float


def rows(phases: list[Phase]) -> list[Row]:
    out = []
    for on in (True, False):
        mine = [p for p in phases if p.priorities == on]
        ttft = [t for p in mine for t in p.interactive_ttft_s]
        out.append(
            Row(
                on,
                len(mine),
                len(ttft),
                statistics.median(ttft) if ttft else float("nan"),
                percentile(ttft, 0.99) if ttft else float("nan"),
                statistics.mean(p.batch_tok_s for p in mine) if mine else 0.0,
            )
        )
    return out


def markdown(table: list[Row], slo_ttft_s: float, w: Workload, max_num_seqs: int) -> list[str]:
    lines = [
        f"{w.batch_clients} batch clients ({w.batch_tokens}-token answers, engine max_num_seqs {max_num_seqs}) "
        f"+ interactive chats at {w.interactive_rate}/s ({w.interactive_tokens}-token answers); "
        f"TTFT SLO {slo_ttft_s * 1000:.0f} ms.",
        "",
        "| priorities | phases | interactive requests | interactive TTFT p50 ms | interactive TTFT p99 ms | "
        "p99 within SLO | batch output tok/s |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for r in table:
        lines.append(
            f"| {'on (0.9 / 0.1)' if r.priorities else 'off (arrival order)'} | {r.phases} | {r.interactive} | "
            f"{r.ttft_p50_s * 1000:.0f} | {r.ttft_p99_s * 1000:.0f} | "
            f"{'yes' if r.ttft_p99_s <= slo_ttft_s else 'no'} | {r.batch_tok_s:.1f} |"
        )
    on, off = table
    if on.ttft_p99_s > 0 and off.batch_tok_s > 0:
        lines += [
            "",
            f"Interactive TTFT p99 without / with priorities: **{off.ttft_p99_s / on.ttft_p99_s:.1f}x**; "
            f"batch tok/s with / without: {on.batch_tok_s / off.batch_tok_s:.2f}x.",
        ]
    return lines


def run(repository: Path, out: Path, w: Workload, rounds: int, max_num_seqs: int, progress=print) -> list[Row]:
    """One server from a copy of `repository` (max_num_seqs set), phases alternating on / off."""
    from build_engines.render import copy_repository
    from serving.launcher import ServerSettings, TritonServer

    out.mkdir(parents=True, exist_ok=True)
    repo = copy_repository(repository, out / "repository", names.OPENVINO_ENGINE, {"max_num_seqs": str(max_num_seqs)})
    phases: list[Phase] = []
    with TritonServer(ServerSettings.on_free_ports(repo, out / "tritonserver.log")) as server:
        for r in range(rounds):
            for on in (True, False) if r % 2 == 0 else (False, True):
                phase = asyncio.run(run_phase(server.settings.grpc_url, on, w, seed=200 + 2 * r + on))
                phases.append(phase)
                progress(
                    f"  round {r} priorities {'on ' if on else 'off'}: {len(phase.interactive_ttft_s)} interactive, "
                    f"TTFT p99 {percentile(phase.interactive_ttft_s, 0.99) * 1000:.0f} ms, "
                    f"batch {phase.batch_tok_s:.1f} tok/s"
                )
    return rows(phases)
