"""The robustness loads: the soak (mixed load for a set time, NVIDIA's client and genai-perf
beside it) and the stress rounds (short streams, clients leaving early).  Each serves a layout of
the default model that the product renders (bench/layouts.py) or any rendered repository with the
server environment it needs (a stand-in layout: `python -m tests.layouts`)."""

from __future__ import annotations

from pathlib import Path

import click

from bench.cli import options
from bench.environments import DEFAULT_ENGINE
from bench.layouts import Layout, render_layout, server_environment
from bench.stress import StressPlan
from contract import names


def served_repository(command):
    """--repository, --server-env: what to serve when no --layout is given."""
    command = click.option(
        "--server-env",
        "server_env",
        multiple=True,
        metavar="NAME=VALUE",
        help="Set in the server's environment when serving --repository (repeatable).",
    )(command)
    return options.repository(
        "The repository to serve when no --layout is given (e.g. a stand-in layout rendered by "
        "`python -m tests.layouts`)."
    )(command)


def _served(
    repository: Path, server_env: tuple[str, ...], layout: Layout | None, out: Path
) -> tuple[Path, tuple[tuple[str, str], ...]]:
    """The repository a load run serves and its server environment: `layout` of the default
    engine rendered into out/repository, or --repository with --server-env."""
    if layout is not None:
        return render_layout(layout, DEFAULT_ENGINE, out / "repository"), ()
    try:
        return repository, server_environment(server_env)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--server-env") from None


@options.command()
@served_repository
@click.option(
    "--layout",
    "layouts",
    multiple=True,
    type=click.Choice([layout.value for layout in Layout]),
    help="Render and soak this repository layout of the default model instead (repeatable, in turn).",
)
@click.option("--duration", "duration_s", type=float, default=600.0, help="Seconds of load, per layout.")
@click.option("--concurrency", type=int, default=8)
@click.option(
    "--hang",
    "hang_s",
    type=float,
    default=180.0,
    help="A request without an end after this long hung (the soak fails).",
)
@click.option(
    "--nvidia-client",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="NVIDIA's end_to_end_grpc_client.py (from a scratch folder): run every 20 s beside the load "
    "with --model-name tensorrt_llm_bls --streaming.",
)
@click.option(
    "--genai-perf/--no-genai-perf",
    default=False,
    help="Run genai-perf (--backend tensorrtllm, tensorrt_llm_bls, streaming) every 5 minutes beside the load.",
)
@options.out_dir("build/soak")
def soak(
    repository: Path,
    server_env: tuple[str, ...],
    layouts: tuple[str, ...],
    duration_s: float,
    concurrency: int,
    hang_s: float,
    nvidia_client: Path | None,
    genai_perf: bool,
    out: Path,
) -> None:
    """Start a server, run mixed load (n > 1, stop words, clients leaving early) through the
    ensemble and the BLS for DURATION, NVIDIA's client and genai-perf beside it; fail on an
    unexpected error, a request that hung, a server that died, or memory growth."""
    from bench.soak import SidePlan, run_soak, write_report
    from serving.launcher import ServerSettings, TritonServer

    side = SidePlan(nvidia_client=nvidia_client)
    if genai_perf:
        from bench.environments import ROOT, ensure_venv

        side = SidePlan(
            nvidia_client,
            genai_perf_venv=ensure_venv("bench-tools", ROOT / "requirements" / "bench-tools.lock"),
            tokenizer=DEFAULT_ENGINE,
        )
    runs: list[tuple[Layout | None, Path]] = [(Layout(name), out / name) for name in layouts] or [(None, out)]
    failed = False
    for layout, layout_out in runs:
        served, environment = _served(repository, server_env, layout, layout_out)
        settings = ServerSettings.on_free_ports(served, layout_out / "tritonserver.log", environment=environment)
        with TritonServer(settings) as server:
            report = run_soak(
                settings.grpc_url,
                server.pid,
                duration_s,
                concurrency,
                log_file=settings.log_file,
                side=side,
                hang_s=hang_s,
                out=layout_out,
            )
        path = write_report(report, layout_out, layout.value if layout else str(repository))
        click.echo(path.read_text())
        failed = failed or report.failed
    if failed:
        raise SystemExit(1)


@options.command()
@served_repository
@click.option(
    "--layout",
    type=click.Choice([layout.value for layout in Layout]),
    default=None,
    help="Render and serve this repository layout of the default model instead.",
)
@click.option("--model", "models", multiple=True, default=(names.ENSEMBLE, names.LLM_BLS))
@click.option("--rounds", type=int, default=5, help="Rounds of load, the server checked after each.")
@click.option(
    "--minutes",
    type=float,
    default=0.0,
    help="Run rounds until this much time has passed instead (a hung round is diagnosed, the server "
    "replaced, and the load goes on).",
)
@click.option("--requests", type=int, default=120, help="Requests per model and round.")
@click.option("--concurrency", type=int, default=12)
@click.option("--abandon-share", type=float, default=StressPlan.abandon_share)
@click.option(
    "--samples-share",
    type=float,
    default=StressPlan.samples_share,
    help="Of the completed requests: n = 2 or 3 samples.",
)
@click.option(
    "--stop-share", type=float, default=StressPlan.stop_share, help="Of the completed requests: with a stop word."
)
@click.option("--max-tokens", type=(int, int), default=StressPlan.max_tokens)
@click.option(
    "--round-deadline",
    "deadline_s",
    type=float,
    default=StressPlan.deadline_s,
    help="A round not over after this long hung.",
)
@options.out_dir("build/stress")
def stress(
    repository: Path,
    server_env: tuple[str, ...],
    layout: str | None,
    models: tuple[str, ...],
    rounds: int,
    minutes: float,
    requests: int,
    concurrency: int,
    abandon_share: float,
    samples_share: float,
    stop_share: float,
    max_tokens: tuple[int, int],
    deadline_s: float,
    out: Path,
) -> None:
    """Start a server, run rounds of short concurrent streams (some abandoned, some timed out, some
    with n samples or stop words) through MODELs; fail if the server died, a round hung (the BLS
    deadlock is named when gdb finds it), or a request ended without a clear answer or error.
    The BLS-deadlock hunt of docs/examples/bench/bls-relay.md: $(python -m tests.layouts pytorch_server
    build/stress/repository) --model tensorrt_llm_bls --minutes 40 --requests 150 --concurrency 24
    --abandon-share 0.4 --max-tokens 1 8 --round-deadline 120 --samples-share 0 --stop-share 0 (the
    load as it ran on the commit before the fix)."""
    from bench.stress import run_rounds
    from serving.launcher import ServerSettings, TritonServer

    repository, environment = _served(repository, server_env, Layout(layout) if layout else None, out)
    settings = ServerSettings.on_free_ports(repository, out / "tritonserver.log", environment=environment)

    def plan_of(i: int) -> StressPlan:
        return StressPlan(
            models,
            requests,
            concurrency,
            abandon_share=abandon_share,
            max_tokens=max_tokens,
            samples_share=samples_share,
            stop_share=stop_share,
            seed=i,
            deadline_s=deadline_s,
        )

    with TritonServer(settings) as server:
        passed = run_rounds(server, plan_of, rounds, minutes, progress=click.echo)
    raise SystemExit(0 if passed else 1)


COMMANDS = (soak, stress)
