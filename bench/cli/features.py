"""What a serving feature buys: prefix caching over multi-turn chats, request priorities beside
batch traffic, prompt-lookup speculative decoding, and KV-aware routing across two replicas."""

from __future__ import annotations

from pathlib import Path

import click

from bench.cli import options


@options.command()
@options.repository()
@options.out_dir("build/bench/multiturn")
@options.chats(users=4)
@click.option("--rounds", type=int, default=2, help="Rounds per server (caching on / off), alternating.")
def multiturn(repository: Path, out: Path, users: int, turns: int, answer_tokens: int, rounds: int) -> None:
    """Multi-turn chats sharing a long system prompt: TTFT per turn with prefix caching on and off."""
    from bench.multiturn import markdown, run

    rows, hit_rate = run(repository, out, users, turns, answer_tokens, rounds, progress=click.echo)
    _write(out / "multiturn.md", markdown(rows, hit_rate))


@options.command("cluster")
@options.repository()
@options.out_dir("build/bench/cluster")
@click.option("--rounds", type=int, default=4, help="Rounds per router mode, alternating.")
@options.chats(users=8)
@click.option("--hop-concurrency", "hop_levels", multiple=True, type=int, default=(1, 16))
@click.option("--hop-pairs", type=int, default=2, help="Alternating pairs per concurrency.")
def cluster_run(
    repository: Path,
    out: Path,
    rounds: int,
    users: int,
    turns: int,
    answer_tokens: int,
    hop_levels: tuple[int, ...],
    hop_pairs: int,
) -> None:
    """Two replicas behind Dynamo: KV-aware vs round-robin routing on multi-turn shared-prefix chat
    (TTFT, throughput, prefix hit rate), then the extra hop (Dynamo vs the kit's front, one replica)."""
    from bench.cluster_routing import Workload, markdown, run
    from serving.side_environments import dynamo_venv

    work = Workload(users=users, turns=turns, answer_tokens=answer_tokens)
    report = run(
        repository,
        dynamo_venv() / "bin" / "python",
        out,
        work,
        rounds=rounds,
        hop_levels=hop_levels,
        hop_pairs=hop_pairs,
        progress=click.echo,
    )
    click.echo("\n".join(markdown(report)))


@options.command()
@options.repository()
@options.out_dir("build/bench/priorities")
@click.option("--batch-clients", type=int, default=12, help="Long generations kept in flight.")
@click.option("--batch-tokens", type=int, default=192)
@click.option("--interactive-rate", type=float, default=0.5, help="Interactive chats per second.")
@click.option("--interactive-tokens", type=int, default=24)
@click.option("--phase-s", type=float, default=40.0, help="Seconds per phase.")
@click.option("--rounds", type=int, default=2, help="Phases with and without priorities, each.")
@click.option("--max-num-seqs", type=int, default=8, help="The engine's running batch for this run.")
@click.option("--slo-ttft-ms", type=float, default=1000.0)
def priorities(
    repository: Path,
    out: Path,
    batch_clients: int,
    batch_tokens: int,
    interactive_rate: float,
    interactive_tokens: int,
    phase_s: float,
    rounds: int,
    max_num_seqs: int,
    slo_ttft_ms: float,
) -> None:
    """Interactive chats beside batch traffic that fills the engine: TTFT with and without priorities."""
    from bench.priorities import Workload, markdown, run

    workload = Workload(batch_clients, batch_tokens, interactive_rate, interactive_tokens, phase_s)
    table = run(repository, out, workload, rounds, max_num_seqs, progress=click.echo)
    _write(out / "priorities.md", markdown(table, slo_ttft_ms / 1000, workload, max_num_seqs))


@options.command()
@options.repository()
@options.out_dir("build/bench/speculative")
@options.levels((1, 16))
@click.option("--max-tokens", type=int, default=128)
@click.option("--rounds", type=int, default=2)
def speculative(repository: Path, out: Path, levels: tuple[int, ...], max_tokens: int, rounds: int) -> None:
    """Prompt-lookup decoding vs plain on input-grounded prompts (the engine in-process)."""
    from transformers import AutoTokenizer

    from bench.offline import engine_parameters
    from bench.speculative import markdown, measure

    params = engine_parameters(repository)
    pairs = measure(
        params,
        AutoTokenizer.from_pretrained(str(params.engine_dir)),
        tuple(levels),
        max_tokens,
        rounds,
        progress=click.echo,
    )
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "speculative.md", markdown(pairs, params.num_assistant_tokens))


def _write(path: Path, lines: list[str]) -> None:
    """A Markdown report: written, then shown."""
    text = "\n".join(lines)
    path.write_text(text + "\n")
    click.echo(text)


COMMANDS = (multiturn, cluster_run, priorities, speculative)
