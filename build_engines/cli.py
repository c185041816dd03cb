"""`python -m build_engines`: inspect -> plan -> build -> repo.

With no --checkpoint the embedded default model (SmolLM2-135M-Instruct) is prepared and used.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import NoReturn

import click

from build_engines import default_model
from build_engines.checkpoint import CheckpointError, inspect_checkpoint
from build_engines.cli_options import SpecCommand, make_spec, spec_options
from build_engines.gpus import GpuError
from build_engines.openvino.numerics import NumericsMode
from build_engines.option_lists import EXISTING_DIR
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend, SpecError
from contract.lora import LoraError

BUILD_DIR = Path("build")
DEFAULT_CHECKPOINT_DIR = BUILD_DIR / "checkpoints" / default_model.DEFAULT_MODEL_NAME
DEFAULT_REPOSITORY = BUILD_DIR / "repository"


DECOUPLED_HELP = (
    "NVIDIA's decoupled_mode: streaming responses (default), or one response per request so unary "
    "gRPC/HTTP infer and non-streaming perf_analyzer work (streaming and batched requests refused)."
)


def default_engine_dir(spec: BuildSpec) -> Path:
    name = f"{spec.checkpoint.name}-{spec.backend.value}-{spec.precision.value}"
    if spec.backend == EngineBackend.TENSORRT_LLM:  # engines of the 25.12 and 26.07 images side by side
        name += f"-tp{spec.trtllm.tp_size}-pp{spec.trtllm.pp_size}-trtllm{spec.trtllm.trtllm_version}"
    elif spec.backend == EngineBackend.TENSORRT_LLM_PYTORCH:
        name += f"-tp{spec.pytorch.tp_size}-pp{spec.pytorch.pp_size}-trtllm{spec.pytorch.trtllm_version}"
    return BUILD_DIR / "engines" / name


def resolve_checkpoint(checkpoint: Path | None) -> Path:
    if checkpoint is not None:
        return checkpoint
    return default_model.prepare_default_checkpoint(DEFAULT_CHECKPOINT_DIR)


def _fail(e: Exception) -> NoReturn:
    raise click.ClickException(str(e)) from None


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Also show the build tools' own output (always in the build log).")
def main(verbose: bool) -> None:
    """Build engines from Llama checkpoints and render the Triton model repository."""
    from build_engines.process import Echo

    Echo.child_output = verbose
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


@main.command("prepare-default")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_CHECKPOINT_DIR, show_default=True
)
@click.option("--force", is_flag=True, help="Convert again even if already prepared.")
def prepare_default(out: Path, force: bool) -> None:
    """Convert the embedded SmolLM2-135M-Instruct GGUF into an HF checkpoint directory."""
    click.echo(default_model.prepare_default_checkpoint(out, force=force))


@main.command()
@click.argument("checkpoint", type=EXISTING_DIR, required=False)
@click.option("--json", "as_json", is_flag=True, help="An engine directory: its whole build.json.")
def inspect(checkpoint: Path | None, as_json: bool) -> None:
    """Print the architecture facts of CHECKPOINT (default: the embedded model) as JSON; for a
    built engine directory, what it is and its fidelity report (accuracy vs the checkpoint)."""
    from contract.build_record import BUILD_RECORD_FILE

    if checkpoint is not None and (checkpoint / BUILD_RECORD_FILE).is_file():
        from build_engines.fidelity.engine_cli import engine_summary

        click.echo(engine_summary(checkpoint, as_json))
        return
    try:
        info = inspect_checkpoint(resolve_checkpoint(checkpoint))
    except CheckpointError as e:
        _fail(e)
    click.echo(json.dumps(info.to_dict(), indent=2))


@main.command("eval-quality")
@click.option("--engine-dir", type=EXISTING_DIR, required=True)
@click.option(
    "--full", is_flag=True, help="The whole measurement (24,575 tokens, 20 x 128-token answers) instead of quick."
)
@click.option(
    "--record/--no-record",
    default=True,
    show_default=True,
    help="Store the report in the engine's build.json (CPU engine).",
)
def eval_quality(engine_dir: Path, full: bool, record: bool) -> None:
    """Measure a built engine against its float32 checkpoint: PPL, KL divergence, top-1 and
    greedy agreement (the report `build` stores), and check its precision's gate."""
    from build_engines.fidelity.engine_cli import evaluate_built_engine

    try:
        click.echo(evaluate_built_engine(engine_dir, "full" if full else "quick", record))
    except (SpecError, ValueError, RuntimeError) as e:
        _fail(e)


LORA_DIR_OPTION = click.option(
    "--lora-dir",
    type=EXISTING_DIR,
    default=None,
    help="PEFT LoRA adapters, one per subdirectory, served beside the base model (selected by lora_task_id, the "
    "adapters in name order from 1, or '<model>:<adapter>' through the OpenAI front).  CPU engine and "
    "tensorrt_llm_pytorch (LoraConfig): loaded at serve time; tensorrt_llm: built into the engine (LoRA plugin, "
    "converted adapters prefetched at start).",
)


def _checked_spec(checkpoint: Path | None, kwargs: dict, lora_dir: Path | None = None):
    """Resolve the checkpoint, build the spec and validate it: every error before any work.
    `--backend gpu` becomes the flow build_engines/gpu/path.py picks, said on stderr."""
    from build_engines.gpu.path import resolve_backend

    try:
        kwargs, why = resolve_backend(kwargs)
        if why:
            click.echo(why, err=True)
        checkpoint = resolve_checkpoint(checkpoint)
        info = inspect_checkpoint(checkpoint)
        spec = make_spec(checkpoint, **kwargs)
        if lora_dir is not None and spec.backend == EngineBackend.TENSORRT_LLM:
            from build_engines.trtllm.lora import lora_options

            spec = dataclasses.replace(spec, trtllm=dataclasses.replace(spec.trtllm, lora=lora_options(lora_dir)))
        spec.validate(info)
    except (CheckpointError, SpecError, GpuError, LoraError) as e:
        _fail(e)
    return checkpoint, info, spec


@main.command(cls=SpecCommand)
@spec_options
@LORA_DIR_OPTION
def plan(checkpoint: Path | None, lora_dir: Path | None, **kwargs) -> None:
    """Print what `build` will do for this spec (steps, exact commands, memory), without doing it."""
    from build_engines.plan_report import plan_lines

    checkpoint, info, spec = _checked_spec(checkpoint, kwargs, lora_dir)
    engine_dir = default_engine_dir(spec)
    click.echo("\n".join(plan_lines(spec, info, engine_dir.resolve())))


@main.command(cls=SpecCommand)
@spec_options
@click.option("--engine-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--repository",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_REPOSITORY,
    show_default=True,
    help="Also render the model repository here.",
)
@click.option("--skip-existing", is_flag=True, help="Keep an engine that is already built for this spec.")
@click.option("--decoupled/--no-decoupled", default=True, show_default=True, help=DECOUPLED_HELP)
@LORA_DIR_OPTION
def build(
    checkpoint: Path | None,
    engine_dir: Path | None,
    repository: Path,
    skip_existing: bool,
    decoupled: bool,
    lora_dir: Path | None,
    **kwargs,
) -> None:
    """Build the engine for the spec, then render the model repository."""
    from build_engines.process import BuildError

    checkpoint, _, spec = _checked_spec(checkpoint, kwargs, lora_dir)
    engine_dir = engine_dir or default_engine_dir(spec)
    is_built, build_engine = _builder(spec.backend)
    if skip_existing and is_built(engine_dir) and reuse_engine(engine_dir, spec):
        click.echo(f"engine up to date: {engine_dir}")
    else:
        try:
            build_engine(spec, engine_dir, log_file=engine_dir.with_name(engine_dir.name + ".log"))
        except BuildError as e:
            _fail(e)
        click.echo(f"engine: {engine_dir}")
    models = _render(engine_dir, repository, decoupled=decoupled, lora_dir=lora_dir)
    click.echo(f"repository: {repository} ({', '.join(models)})")


def _render(engine_dir: Path, out: Path, **options) -> list[str]:
    from build_engines.repository import render_repository

    try:
        return render_repository(engine_dir, out, **options)
    except LoraError as e:
        _fail(e)


def reuse_engine(engine_dir: Path, spec: BuildSpec) -> bool:
    """True if the built engine serves `spec` as it is; its record then takes the spec's
    serving settings (limits, queue), which need no rebuild."""
    from contract.build_record import BuildRecord

    record = BuildRecord.read(engine_dir)
    if not spec.builds_as(record.spec):
        return False
    if spec.backend == EngineBackend.OPENVINO and spec.fidelity.evaluation != "off":
        if not record.fidelity:
            return False  # built before fidelity reports (and pinned numerics): measure it again
        if spec.openvino.numerics == NumericsMode.FAST.value and not record.numerics:
            return False  # built before the numerics were measured: `fast` has nothing to choose from
    if record.spec != spec.to_dict():
        dataclasses.replace(record, spec=spec.to_dict()).write(engine_dir)
    return True


def _builder(backend: EngineBackend):
    """(engine_is_built, build) of a backend; TensorRT-LLM's only inside its image."""
    if backend == EngineBackend.OPENVINO:
        from build_engines.openvino.build import build_openvino_engine, engine_is_built

        return engine_is_built, build_openvino_engine
    if backend == EngineBackend.TENSORRT_LLM_PYTORCH:  # copying needs nothing; quantizing checks its image itself
        from build_engines.pytorch.build import build_pytorch_engine, engine_is_built

        return engine_is_built, build_pytorch_engine
    import importlib.util

    if importlib.util.find_spec("tensorrt_llm") is None:
        _fail(
            SpecError(
                "tensorrt_llm is not installed here: build TensorRT-LLM engines inside the pinned image "
                "(`make build-engine BACKEND=tensorrt_llm ...` runs this in the compose `builder` service)"
            )
        )
    from build_engines.trtllm.build import build_trtllm_engine, engine_is_built

    return engine_is_built, build_trtllm_engine


@main.command()
@click.option("--engine-dir", type=EXISTING_DIR, required=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_REPOSITORY, show_default=True)
@click.option(
    "--relay", is_flag=True, help="CPU engine only: serve it behind engine_relay, as tensorrt_llm is on a GPU."
)
@click.option("--decoupled/--no-decoupled", default=True, show_default=True, help=DECOUPLED_HELP)
@LORA_DIR_OPTION
def repo(engine_dir: Path, out: Path, relay: bool, decoupled: bool, lora_dir: Path | None) -> None:
    """Render the Triton model repository for a built engine."""
    models = _render(engine_dir, out, relay=relay, decoupled=decoupled, lora_dir=lora_dir)
    click.echo(f"repository: {out} ({', '.join(models)})")
