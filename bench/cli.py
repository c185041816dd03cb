"""`python -m bench`: benchmarks against the served ensemble."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import click

from bench.environments import DEFAULT_ENGINE
from bench.layouts import Layout, render_layout, server_environment
from bench.peer_compare import Peer
from bench.stress import StressPlan
from bench.throughput import run_closed_loop
from bench.workload import fixed_length_jobs
from contract import names


@click.group()
def main() -> None:
    """Benchmarks of the served ensemble."""


@main.command()
@click.option("--url", default=names.DEFAULT_GRPC_URL, show_default=True)
@click.option("--concurrency", "levels", multiple=True, type=int, default=(1, 16), show_default=True)
@click.option("--requests-per-level", type=int, default=None, help="Default: 4 x concurrency (at least 8).")
@click.option("--output-tokens", type=int, default=128, show_default=True)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("build/bench/throughput.json"),
    show_default=True,
)
def throughput(
    url: str, levels: tuple[int, ...], requests_per_level: int | None, output_tokens: int, out: Path
) -> None:
    """Output tokens/s at each concurrency, and the in-flight batching speed-up over the first."""
    rows = []
    asyncio.run(run_closed_loop(url, fixed_length_jobs(2, 8, seed=99), 2))  # warm-up
    for level in levels:
        n = requests_per_level or max(8, 4 * level)
        result = asyncio.run(run_closed_loop(url, fixed_length_jobs(n, output_tokens, seed=level), level))
        rows.append(result.to_dict())
        click.echo(
            f"concurrency {level:>3}: {result.output_tokens_per_s:8.1f} output tok/s  "
            f"TTFT p50 {result.ttft_p50_s * 1000:7.1f} ms  ITL p50 {result.itl_p50_s * 1000:6.1f} ms  "
            f"({result.requests} requests, {result.seconds:.1f}s)"
        )
    base = rows[0]["output_tokens_per_s"]
    for row in rows:
        row["speedup_vs_first"] = round(row["output_tokens_per_s"] / base, 2) if base else None
    click.echo(
        "speed-up vs concurrency %d: %s"
        % (rows[0]["concurrency"], ", ".join(f"c{r['concurrency']}={r['speedup_vs_first']}x" for r in rows))
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"url": url, "output_tokens": output_tokens, "levels": rows}, indent=2) + "\n")
    click.echo(f"wrote {out}")


@main.command("aiperf")
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
    help="For the served model's name and its tokenizer (the checkpoint directory).",
)
@click.option(
    "--http-url",
    default=f"http://{names.DEFAULT_HOST}:{names.DEFAULT_HTTP_PORT}",
    show_default=True,
    help="Triton's HTTP endpoint (generate_stream of the ensemble and the BLS).",
)
@click.option("--openai-url", default=None, help="The OpenAI front (http://host:port); left out: no chat target.")
@click.option("--concurrency", "levels", multiple=True, type=int, default=(1, 4, 16), show_default=True)
@click.option("--requests-per-stream", type=int, default=4, show_default=True, help="Requests per concurrent stream.")
@click.option("--min-requests", type=int, default=8, show_default=True)
@click.option("--input-tokens", type=int, default=128, show_default=True)
@click.option("--output-tokens", type=int, default=128, show_default=True)
@click.option(
    "--slo-ttft-ms", type=float, default=1000.0, show_default=True, help="Goodput: time to first token at most."
)
@click.option("--slo-itl-ms", type=float, default=60.0, show_default=True, help="Goodput: inter-token latency at most.")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/bench/aiperf"), show_default=True
)
def aiperf_sweep(
    repository,
    http_url,
    openai_url,
    levels,
    requests_per_stream,
    min_requests,
    input_tokens,
    output_tokens,
    slo_ttft_ms,
    slo_itl_ms,
    out,
):
    """AIPerf sweeps against a running server: the OpenAI front's streaming chat and Triton's HTTP
    generate_stream of the ensemble and tensorrt_llm_bls, at each concurrency (bench/aiperf.py)."""
    from bench import aiperf
    from bench.environments import aiperf_venv
    from bench.genai_perf import Slo
    from bench.suite import engine_dir_of
    from serving.openai_process import served_model_name

    run_targets = aiperf.targets(openai_url, http_url, served_model_name(repository), (names.ENSEMBLE, names.LLM_BLS))
    if openai_url is None:
        run_targets = run_targets[1:]
    sweep = aiperf.Sweep(input_tokens, output_tokens, requests_per_stream, min_requests)
    slo = Slo(slo_ttft_ms / 1000, slo_itl_ms / 1000)
    results = aiperf.sweep_targets(
        aiperf_venv(), run_targets, sweep, tuple(levels), engine_dir_of(repository), out, slo
    )
    path = aiperf.write_report(
        out,
        results,
        [
            f"Load generator: {aiperf.GENERATOR} (streaming), workload {sweep.workload}, goodput SLO: TTFT <= "
            f"{slo_ttft_ms:g} ms and ITL <= {slo_itl_ms:g} ms."
        ],
    )
    click.echo(f"wrote {path}")


@main.command()
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/bench/report"), show_default=True
)
@click.option(
    "--slo-ttft-ms", type=float, default=1000.0, show_default=True, help="Goodput: time to first token at most."
)
@click.option("--slo-itl-ms", type=float, default=60.0, show_default=True, help="Goodput: inter-token latency at most.")
@click.option("--input-tokens", type=int, default=128, show_default=True)
@click.option("--output-tokens", type=int, default=128, show_default=True)
@click.option("--concurrency", "levels", multiple=True, type=int, default=(1, 4, 16), show_default=True)
@click.option("--request-rate", "rates", multiple=True, type=float, default=(1.0, 2.0, 4.0), show_default=True)
@click.option(
    "--peer/--no-peer",
    default=True,
    show_default=True,
    help="Compare with llama.cpp's server, vLLM's CPU build and transformers serve (python -m bench peers).",
)
@click.option(
    "--price-per-hour",
    "price_per_hour",
    type=float,
    default=None,
    help="USD per instance-hour: the report adds $/1M output tokens per load level and at the SLO-meeting load.",
)
@click.option("--gpus-per-replica", type=int, default=1, show_default=True, help="GPUs one replica uses (TP x PP).")
@click.option("--gpus-per-instance", type=int, default=1, show_default=True, help="GPUs the priced instance has.")
@click.option(
    "--gpu-price-per-hour",
    "gpu_price_per_hour",
    type=click.FloatRange(min=0),
    default=None,
    help="USD per GPU-hour: the report prices NVIDIA's published TensorRT-LLM figures beside this run's.",
)
@click.option(
    "--aiperf/--no-aiperf",
    "with_aiperf",
    default=True,
    show_default=True,
    help="AIPerf sweeps of the HTTP streaming entry points (front chat, generate_stream of ensemble and BLS).",
)
def suite(
    repository,
    out,
    slo_ttft_ms,
    slo_itl_ms,
    input_tokens,
    output_tokens,
    levels,
    rates,
    peer,
    price_per_hour,
    gpus_per_replica,
    gpus_per_instance,
    gpu_price_per_hour,
    with_aiperf,
):
    """Sweeps with perf_analyzer (gRPC) and AIPerf (HTTP), the baselines side by side, a Markdown report with plots."""
    from bench.cost import Pricing
    from bench.genai_perf import Slo
    from bench.suite import SuiteConfig, run_suite

    try:
        pricing = None if price_per_hour is None else Pricing(price_per_hour, gpus_per_replica, gpus_per_instance)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None
    config = SuiteConfig(
        repository=repository,
        out=out,
        slo=Slo(slo_ttft_ms / 1000, slo_itl_ms / 1000),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        concurrency=tuple(sorted(levels)),
        request_rates=tuple(rates),
        peers=tuple(Peer) if peer else (),
        pricing=pricing,
        gpu_hour_usd=gpu_price_per_hour,
        aiperf=with_aiperf,
    )
    click.echo(f"report: {run_suite(config)}")


@main.command()
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
    help="The repository to serve when no --layout is given (e.g. a stand-in layout rendered by "
    "`python -m tests.layouts`).",
)
@click.option(
    "--server-env",
    "server_env",
    multiple=True,
    metavar="NAME=VALUE",
    help="Set in the server's environment when serving --repository (repeatable).",
)
@click.option(
    "--layout",
    "layouts",
    multiple=True,
    type=click.Choice([layout.value for layout in Layout]),
    help="Render and soak this repository layout of the default model instead (repeatable, in turn).",
)
@click.option(
    "--duration", "duration_s", type=float, default=600.0, show_default=True, help="Seconds of load, per layout."
)
@click.option("--concurrency", type=int, default=8, show_default=True)
@click.option(
    "--hang",
    "hang_s",
    type=float,
    default=180.0,
    show_default=True,
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
    show_default=True,
    help="Run genai-perf (--backend tensorrtllm, tensorrt_llm_bls, streaming) every 5 minutes beside the load.",
)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/soak"), show_default=True)
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

    engine = DEFAULT_ENGINE
    side = SidePlan(nvidia_client=nvidia_client)
    if genai_perf:
        from bench.environments import ROOT, ensure_venv

        side = SidePlan(
            nvidia_client,
            genai_perf_venv=ensure_venv("bench-tools", ROOT / "requirements" / "bench-tools.lock"),
            tokenizer=engine,
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


@main.command()
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
    help="The repository to serve when no --layout is given (e.g. a stand-in layout rendered by "
    "`python -m tests.layouts`).",
)
@click.option(
    "--server-env",
    "server_env",
    multiple=True,
    metavar="NAME=VALUE",
    help="Set in the server's environment when serving --repository (repeatable).",
)
@click.option(
    "--layout",
    type=click.Choice([layout.value for layout in Layout]),
    default=None,
    help="Render and serve this repository layout of the default model instead.",
)
@click.option("--model", "models", multiple=True, default=(names.ENSEMBLE, names.LLM_BLS), show_default=True)
@click.option("--rounds", type=int, default=5, show_default=True, help="Rounds of load, the server checked after each.")
@click.option(
    "--minutes",
    type=float,
    default=0.0,
    show_default=True,
    help="Run rounds until this much time has passed instead (a hung round is diagnosed, the server "
    "replaced, and the load goes on).",
)
@click.option("--requests", type=int, default=120, show_default=True, help="Requests per model and round.")
@click.option("--concurrency", type=int, default=12, show_default=True)
@click.option("--abandon-share", type=float, default=StressPlan.abandon_share, show_default=True)
@click.option(
    "--samples-share",
    type=float,
    default=StressPlan.samples_share,
    show_default=True,
    help="Of the completed requests: n = 2 or 3 samples.",
)
@click.option(
    "--stop-share",
    type=float,
    default=StressPlan.stop_share,
    show_default=True,
    help="Of the completed requests: with a stop word.",
)
@click.option("--max-tokens", type=(int, int), default=StressPlan.max_tokens, show_default=True)
@click.option(
    "--round-deadline",
    "deadline_s",
    type=float,
    default=StressPlan.deadline_s,
    show_default=True,
    help="A round not over after this long hung.",
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/stress"), show_default=True
)
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
    build/stress/repository) --model
    tensorrt_llm_bls --minutes 40 --requests 150 --concurrency 24 --abandon-share 0.4 --max-tokens 1 8
    --round-deadline 120 --samples-share 0 --stop-share 0 (the load as it ran on the commit before the fix)."""
    from bench.stress import ServerWatch, StressStuck, deadlocked_bls_stubs, run_stress
    from serving.launcher import ServerSettings, TritonServer

    repository, environment = _served(repository, server_env, Layout(layout) if layout else None, out)
    settings = ServerSettings.on_free_ports(repository, out / "tritonserver.log", environment=environment)
    end = time.monotonic() + minutes * 60
    failed, hung, i = False, 0, 0
    with TritonServer(settings) as server:
        watch = ServerWatch.of(server.pid, settings.log_file)
        while (i < rounds) if not minutes else (time.monotonic() < end):
            plan = StressPlan(
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
            i += 1
            try:
                report = run_stress(settings.grpc_url, plan)
            except StressStuck as e:
                stuck = deadlocked_bls_stubs(server.pid)
                hung += 1
                click.echo(f"round {i}: HUNG ({e}); BLS deadlock in: {', '.join(stuck) or 'none found'}")
                failed = True
                server.stop(drain=False)
                server.start()
                server.wait_ready()
                watch = ServerWatch.of(server.pid, settings.log_file)
                continue
            problems = watch.problems()
            click.echo(
                f"round {i}: {dict(sorted((f'{m}/{o}', n) for (m, o), n in report.outcomes.items()))}"
                f" unexpected={len(report.unexpected)} server={'DEAD: ' + '; '.join(problems) if problems else 'alive'}"
            )
            for line in report.unexpected[:5]:
                click.echo(f"  {line}")
            failed = failed or bool(problems or report.unexpected)
            if problems:
                break
    click.echo(f"{i} rounds, {hung} hung")
    raise SystemExit(1 if failed else 0)


@main.command("postprocessing")
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option("--served/--no-served", default=True, show_default=True, help="Also measure the served model.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("build/bench/postprocessing.json"),
    show_default=True,
)
def postprocessing_cost(repository: Path, served: bool, out: Path) -> None:
    """Microseconds of postprocessing per streamed token: 1 and 16 streams, 64- and 1024-token answers."""
    from bench import postprocessing_cost as pc
    from bench.suite import engine_dir_of

    tokenizer_dir = engine_dir_of(repository)
    rows = [pc.in_process(tokenizer_dir, s, n) for s in (1, 16) for n in (64, 1024)]
    if served:
        from serving.launcher import ServerSettings, TritonServer

        settings = ServerSettings.on_free_ports(repository, out.parent / "postprocessing-tritonserver.log")
        with TritonServer(settings) as server:
            rows += [pc.served(settings.grpc_url, server.pid, s, n) for s in (1, 16) for n in (64, 1024)]
    for r in rows:
        click.echo(
            f"{r.where:10} {r.streams:>2} streams x {r.tokens_per_stream:>4} tokens: {r.us_per_token:7.2f} us/token"
        )
    for where in {r.where for r in rows}:
        for s in (1, 16):
            short, long_ = (
                next(r for r in rows if (r.where, r.streams, r.tokens_per_stream) == (where, s, n)) for n in (64, 1024)
            )
            click.echo(
                f"{where} {s} streams: 1024-token / 64-token cost per token = "
                f"{long_.us_per_token / short.us_per_token:.2f}"
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")


@main.command()
@click.option(
    "--repository",
    "repositories",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=(Path("build/repository"),),
    show_default=True,
    help="Repeat for the same engine at other numerics (`build --numerics exact --repository DIR` renders one): "
    "every round runs each of ours and the peer.",
)
@click.option(
    "--exact/--no-exact",
    default=True,
    show_default=True,
    help="With one repository whose engine serves other numerics than exact: a copy serving exact beside it.",
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/bench/peers"), show_default=True
)
@click.option(
    "--peer",
    "peers",
    multiple=True,
    type=click.Choice([p.value for p in Peer]),
    default=("llama.cpp", "vllm"),
    show_default=True,
)
@click.option("--concurrency", "levels", multiple=True, type=int, default=(1, 16), show_default=True)
@click.option("--output-tokens", type=int, default=128, show_default=True)
@click.option("--rounds", type=int, default=2, show_default=True, help="Pairs (ours, peer) per peer and concurrency.")
@click.option(
    "--engine-rounds",
    type=int,
    default=3,
    show_default=True,
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


@main.command()
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/bench/multiturn"), show_default=True
)
@click.option("--users", type=int, default=4, show_default=True, help="Conversations at once.")
@click.option("--turns", type=int, default=4, show_default=True)
@click.option("--answer-tokens", type=int, default=32, show_default=True)
@click.option(
    "--rounds", type=int, default=2, show_default=True, help="Rounds per server (caching on / off), alternating."
)
def multiturn(repository: Path, out: Path, users: int, turns: int, answer_tokens: int, rounds: int) -> None:
    """Multi-turn chats sharing a long system prompt: TTFT per turn with prefix caching on and off."""
    from bench.multiturn import markdown, run

    rows, hit_rate = run(repository, out, users, turns, answer_tokens, rounds, progress=click.echo)
    text = "\n".join(markdown(rows, hit_rate))
    (out / "multiturn.md").write_text(text + "\n")
    click.echo(text)


@main.command("cluster")
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/bench/cluster"), show_default=True
)
@click.option("--rounds", type=int, default=4, show_default=True, help="Rounds per router mode, alternating.")
@click.option("--users", type=int, default=8, show_default=True, help="Conversations at once.")
@click.option("--turns", type=int, default=4, show_default=True)
@click.option("--answer-tokens", type=int, default=32, show_default=True)
@click.option("--hop-concurrency", "hop_levels", multiple=True, type=int, default=(1, 16), show_default=True)
@click.option("--hop-pairs", type=int, default=2, show_default=True, help="Alternating pairs per concurrency.")
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


@main.command()
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=Path("build/bench/priorities"), show_default=True
)
@click.option("--batch-clients", type=int, default=12, show_default=True, help="Long generations kept in flight.")
@click.option("--batch-tokens", type=int, default=192, show_default=True)
@click.option("--interactive-rate", type=float, default=0.5, show_default=True, help="Interactive chats per second.")
@click.option("--interactive-tokens", type=int, default=24, show_default=True)
@click.option("--phase-s", type=float, default=40.0, show_default=True, help="Seconds per phase.")
@click.option("--rounds", type=int, default=2, show_default=True, help="Phases with and without priorities, each.")
@click.option("--max-num-seqs", type=int, default=8, show_default=True, help="The engine's running batch for this run.")
@click.option("--slo-ttft-ms", type=float, default=1000.0, show_default=True)
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
    text = "\n".join(markdown(table, slo_ttft_ms / 1000, workload, max_num_seqs))
    (out / "priorities.md").write_text(text + "\n")
    click.echo(text)


@main.command()
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("build/bench/speculative"),
    show_default=True,
)
@click.option("--concurrency", "levels", multiple=True, type=int, default=(1, 16), show_default=True)
@click.option("--max-tokens", type=int, default=128, show_default=True)
@click.option("--rounds", type=int, default=2, show_default=True)
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
    text = "\n".join(markdown(pairs, params.num_assistant_tokens))
    out.mkdir(parents=True, exist_ok=True)
    (out / "speculative.md").write_text(text + "\n")
    click.echo(text)


@main.command("pipeline-tax")
@click.option(
    "--repository",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=Path("build/repository"),
    show_default=True,
)
@click.option("--concurrency", type=int, default=16, show_default=True)
@click.option("--output-tokens", type=int, default=64, show_default=True)
@click.option("--rounds", type=int, default=4, show_default=True)
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
