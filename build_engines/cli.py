"""`python -m build_engines`: inspect -> plan -> build -> repo.

With no --checkpoint the embedded default model (SmolLM2-135M-Instruct) is prepared and used.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import click

from build_engines import default_model
from build_engines.checkpoint import CheckpointError, inspect_checkpoint
from build_engines.spec import (
    DEFAULT_PRECISION,
    BuildSpec,
    EngineBackend,
    EngineLimits,
    OpenVinoOptions,
    Precision,
    SpecError,
)

BUILD_DIR = Path("build")
DEFAULT_CHECKPOINT_DIR = BUILD_DIR / "checkpoints" / default_model.DEFAULT_MODEL_NAME
DEFAULT_REPOSITORY = BUILD_DIR / "repository"


def default_engine_dir(checkpoint: Path, backend: EngineBackend, precision: Precision) -> Path:
    return BUILD_DIR / "engines" / f"{checkpoint.name}-{backend.value}-{precision.value}"


def resolve_checkpoint(checkpoint: Path | None) -> Path:
    if checkpoint is not None:
        return checkpoint
    return default_model.prepare_default_checkpoint(DEFAULT_CHECKPOINT_DIR)


def spec_options(f):
    limits = EngineLimits()
    options = [
        click.option("--checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
                     help="HF Llama checkpoint dir (default: the embedded SmolLM2-135M-Instruct)."),
        click.option("--backend", type=click.Choice([b.value for b in EngineBackend]), default=EngineBackend.OPENVINO.value,
                     show_default=True),
        click.option("--precision", type=click.Choice([p.value for p in Precision]), default=None,
                     help="openvino: int8 (default) | int4 | fp16; tensorrt_llm: fp16 | bf16 | fp8 | int8_sq | int8_wo | int4_awq"),
        click.option("--max-batch-size", type=int, default=limits.max_batch_size, show_default=True),
        click.option("--max-input-len", type=int, default=limits.max_input_len, show_default=True),
        click.option("--max-seq-len", type=int, default=limits.max_seq_len, show_default=True),
        click.option("--max-num-tokens", type=int, default=limits.max_num_tokens, show_default=True,
                     help="Tokens per engine step (prefill chunk + decodes)."),
        click.option("--default-max-tokens", type=int, default=limits.default_max_tokens, show_default=True),
        click.option("--kv-cache-size-gb", type=int, default=None, help="CPU KV-cache pool (default: fits the limits)."),
        click.option("--prefix-caching/--no-prefix-caching", default=False, show_default=True),
        click.option("--inference-threads", type=int, default=0, show_default=True, help="0 = all cores."),
        click.option("--max-queue-size", type=int, default=64, show_default=True,
                     help="Requests waiting beyond the running batch; more are refused (UNAVAILABLE)."),
        click.option("--queue-timeout", "queue_timeout_s", type=float, default=60.0, show_default=True,
                     help="Fail a request that has no first token after this many seconds (0 = never)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def make_spec(checkpoint: Path, backend: str, precision: str | None, max_batch_size: int, max_input_len: int,
              max_seq_len: int, max_num_tokens: int, default_max_tokens: int, kv_cache_size_gb: int | None,
              prefix_caching: bool, inference_threads: int, max_queue_size: int, queue_timeout_s: float) -> BuildSpec:
    engine_backend = EngineBackend(backend)
    return BuildSpec(
        checkpoint=checkpoint.resolve(),
        backend=engine_backend,
        precision=Precision(precision) if precision else DEFAULT_PRECISION[engine_backend],
        limits=EngineLimits(max_batch_size, max_input_len, max_seq_len, max_num_tokens, default_max_tokens),
        openvino=OpenVinoOptions(kv_cache_size_gb, prefix_caching, inference_threads, max_queue_size, queue_timeout_s),
    )


def _fail(e: Exception) -> None:
    raise click.ClickException(str(e)) from None


@click.group()
@click.option("-v", "--verbose", is_flag=True)
def main(verbose: bool) -> None:
    """Build engines from Llama checkpoints and render the Triton model repository."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


@main.command("prepare-default")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_CHECKPOINT_DIR, show_default=True)
@click.option("--force", is_flag=True, help="Convert again even if already prepared.")
def prepare_default(out: Path, force: bool) -> None:
    """Convert the embedded SmolLM2-135M-Instruct GGUF into an HF checkpoint directory."""
    click.echo(default_model.prepare_default_checkpoint(out, force=force))


@main.command()
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False, path_type=Path), required=False)
def inspect(checkpoint: Path | None) -> None:
    """Print the architecture facts of CHECKPOINT (default: the embedded model) as JSON."""
    try:
        info = inspect_checkpoint(resolve_checkpoint(checkpoint))
    except CheckpointError as e:
        _fail(e)
    click.echo(json.dumps(info.to_dict(), indent=2))


@main.command()
@spec_options
def plan(checkpoint: Path | None, **kwargs) -> None:
    """Print what `build` will do for this spec, without doing it."""
    from build_engines.openvino_build import export_command

    try:
        checkpoint = resolve_checkpoint(checkpoint)
        info = inspect_checkpoint(checkpoint)
        spec = make_spec(checkpoint, **kwargs)
        spec.validate(info)
    except (CheckpointError, SpecError) as e:
        _fail(e)
    engine_dir = default_engine_dir(checkpoint, spec.backend, spec.precision)
    click.echo(f"checkpoint: {checkpoint} ({info.architecture}, {info.num_parameters / 1e6:.1f}M parameters)")
    click.echo(f"engine dir: {engine_dir}")
    click.echo("step 1: " + " ".join(export_command(spec, info, engine_dir)))
    per_token = info.kv_cache_bytes_per_token(2)
    click.echo(f"KV cache: {per_token / 1024:.1f} KiB/token at 16 bits; pool {spec.kv_cache_size_gb(info)} GB "
               f"for {spec.limits.max_batch_size} x {spec.limits.max_seq_len} tokens")


@main.command()
@spec_options
@click.option("--engine-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--repository", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_REPOSITORY,
              show_default=True, help="Also render the model repository here.")
@click.option("--skip-existing", is_flag=True, help="Keep an engine that is already built for this spec.")
def build(checkpoint: Path | None, engine_dir: Path | None, repository: Path, skip_existing: bool, **kwargs) -> None:
    """Build the engine for the spec, then render the model repository."""
    from build_engines.openvino_build import BuildError, build_openvino_engine, engine_is_built
    from build_engines.repository import render_repository

    try:
        checkpoint = resolve_checkpoint(checkpoint)
        spec = make_spec(checkpoint, **kwargs)
        spec.validate(inspect_checkpoint(checkpoint))
    except (CheckpointError, SpecError) as e:
        _fail(e)
    if spec.backend != EngineBackend.OPENVINO:
        _fail(SpecError(f"backend {spec.backend.value!r} cannot be built here"))
    engine_dir = engine_dir or default_engine_dir(checkpoint, spec.backend, spec.precision)
    if skip_existing and engine_is_built(engine_dir) and reuse_engine(engine_dir, spec):
        click.echo(f"engine up to date: {engine_dir}")
    else:
        try:
            build_openvino_engine(spec, engine_dir, log_file=engine_dir.with_name(engine_dir.name + ".log"))
        except BuildError as e:
            _fail(e)
        click.echo(f"engine: {engine_dir}")
    models = render_repository(engine_dir, repository)
    click.echo(f"repository: {repository} ({', '.join(models)})")


def reuse_engine(engine_dir: Path, spec: BuildSpec) -> bool:
    """True if the built engine serves `spec` as it is; its record then takes the spec's
    serving settings (limits, queue), which need no rebuild."""
    from contract.build_record import BuildRecord

    record = BuildRecord.read(engine_dir)
    if BuildSpec.from_dict(record.spec).artifact_fields() != spec.artifact_fields():
        return False
    if record.spec != spec.to_dict():
        dataclasses.replace(record, spec=spec.to_dict()).write(engine_dir)
    return True


@main.command()
@click.option("--engine-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_REPOSITORY, show_default=True)
def repo(engine_dir: Path, out: Path) -> None:
    """Render the Triton model repository for a built engine."""
    from build_engines.repository import render_repository

    models = render_repository(engine_dir, out)
    click.echo(f"repository: {out} ({', '.join(models)})")

