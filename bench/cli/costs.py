"""What the stack costs: postprocessing per streamed token, the served pipeline against the same
engine in-process (the pipeline tax), and ours against the CPU peers (llama.cpp, vLLM,
transformers serve)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bench.cli import options
from bench.peer_compare import Peer


@options.command("postprocessing")
@options.repository()
@click.option("--served/--no-served", default=True, help="Also measure the served model.")
@options.out_file("build/bench/postprocessing.json")
def postprocessing_cost(repository: Path, served: bool, out: Path) -> None:
    """Microseconds of postprocessing per streamed token: 1 and 16 streams, 64- and 1024-token answers."""
    from bench import postprocessing_cost as pc

    rows = pc.measure(repository, served, out.parent / "postprocessing-tritonserver.log")
    click.echo("\n".join(pc.summary(rows)))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")


@options.command("pipeline-tax")
@options.repository()
@click.option("--concurrency", type=int, default=16)
@click.option("--output-tokens", type=int, default=64)
@click.option("--rounds", type=int, default=4)
def pipeline_tax_command(repository: Path, concurrency: int, output_tokens: int, rounds: int) -> None:
    """Served ensemble (light in-process gRPC client) vs the same engine in-process, alternating
    pairs, with the served runs' CPU per server process and for the client."""
    from bench import pipeline_tax
    from bench.offline import engine_parameters
    from serving.launcher import ServerSettings, TritonServer

    params = engine_parameters(repository)
    settings = ServerSettings.on_free_ports(repository, Path("build/bench/pipeline-tax-tritonserver.log"))
    with TritonServer(settings) as server:
        pairs = pipeline_tax.measure(
            settings.grpc_url, params, concurrency, output_tokens, rounds, progress=click.echo, server_pid=server.pid
        )
    click.echo(pipeline_tax.summary(pairs))


@options.command()
@click.option(
    "--repository",
    "repositories",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=(Path("build/repository"),),
    help="Repeat for the same engine at other numerics (`build --numerics exact --repository DIR` renders one): "
    "every round runs each of ours and the peer.",
)
@click.option(
    "--exact/--no-exact",
    default=True,
    help="With one repository whose engine serves other numerics than exact: a copy serving exact beside it.",
)
@options.out_dir("build/bench/peers")
@click.option(
    "--peer", "peers", multiple=True, type=click.Choice([p.value for p in Peer]), default=("llama.cpp", "vllm")
)
@options.levels((1, 16))
@click.option("--output-tokens", type=int, default=128)
@click.option("--rounds", type=int, default=2, help="Pairs (ours, peer) per peer and concurrency.")
@click.option(
    "--engine-rounds",
    type=int,
    default=3,
    help="With llama.cpp: pairs of the engines alone at one stream (ours in-process, llama-bench); 0: none.",
)
def peers(
    repositories: tuple[Path, ...],
    exact: bool,
    out: Path,
    peers: tuple[str, ...],
    levels: tuple[int, ...],
    output_tokens: int,
    rounds: int,
    engine_rounds: int,
) -> None:
    """Ours vs llama.cpp's server (Q8_0), vLLM's CPU build and transformers serve, in alternating pairs;
    with llama.cpp, the engines alone too (ours in-process vs llama-bench).
    Builds each peer under build/ on first use (llama.cpp: ~11 CPU-minutes, natively; where that
    build's server fails a short completion, again with the CPU's features named and AMX off)."""
    from bench.genai_perf import Slo
    from bench.peer_compare import run, with_exact

    served = with_exact(repositories[0], out) if exact and len(repositories) == 1 else list(repositories)
    _, report = run(
        served,
        out,
        tuple(Peer(p) for p in peers),
        tuple(levels),
        output_tokens,
        rounds,
        Slo(1.0, 0.06),
        engine_rounds,
    )
    click.echo(report.read_text())


COMMANDS = (postprocessing_cost, pipeline_tax_command, peers)
