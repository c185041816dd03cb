"""The load sweeps: closed-loop throughput, AIPerf's sweeps of the HTTP entry points, and the
suite behind `make bench` (perf_analyzer, AIPerf, the baselines and the report)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from bench.cli import options
from contract import names


@options.command()
@click.option("--url", default=names.DEFAULT_GRPC_URL)
@options.levels((1, 16))
@click.option("--requests-per-level", type=int, default=None, help="Default: 4 x concurrency (at least 8).")
@click.option("--output-tokens", type=int, default=128)
@options.out_file("build/bench/throughput.json")
def throughput(
    url: str, levels: tuple[int, ...], requests_per_level: int | None, output_tokens: int, out: Path
) -> None:
    """Output tokens/s at each concurrency, and the in-flight batching speed-up over the first."""
    from bench.throughput import sweep

    rows = sweep(url, levels, requests_per_level, output_tokens, progress=click.echo)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"url": url, "output_tokens": output_tokens, "levels": rows}, indent=2) + "\n")
    click.echo(f"wrote {out}")


@options.command("aiperf")
@options.repository("For the served model's name and its tokenizer (the checkpoint directory).")
@click.option(
    "--http-url",
    default=f"http://{names.DEFAULT_HOST}:{names.DEFAULT_HTTP_PORT}",
    help="Triton's HTTP endpoint (generate_stream of the ensemble and the BLS).",
)
@click.option("--openai-url", default=None, help="The OpenAI front (http://host:port); left out: no chat target.")
@options.levels((1, 4, 16))
@click.option("--requests-per-stream", type=int, default=4, help="Requests per concurrent stream.")
@click.option("--min-requests", type=int, default=8)
@click.option("--input-tokens", type=int, default=128)
@click.option("--output-tokens", type=int, default=128)
@options.slo
@options.out_dir("build/bench/aiperf")
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


@options.command()
@options.repository()
@options.out_dir("build/bench/report")
@options.slo
@click.option("--input-tokens", type=int, default=128)
@click.option("--output-tokens", type=int, default=128)
@options.levels((1, 4, 16))
@click.option("--request-rate", "rates", multiple=True, type=float, default=(1.0, 2.0, 4.0))
@click.option(
    "--peer/--no-peer",
    default=True,
    help="Compare with llama.cpp's server, vLLM's CPU build and transformers serve (python -m bench peers).",
)
@click.option(
    "--price-per-hour",
    "price_per_hour",
    type=float,
    default=None,
    help="USD per instance-hour: the report adds $/1M output tokens per load level and at the SLO-meeting load.",
)
@click.option("--gpus-per-replica", type=int, default=1, help="GPUs one replica uses (TP x PP).")
@click.option("--gpus-per-instance", type=int, default=1, help="GPUs the priced instance has.")
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
    from bench.peer_compare import Peer
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


COMMANDS = (throughput, aiperf_sweep, suite)
