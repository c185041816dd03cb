"""Build a TensorRT-LLM engine: run the planned steps, then record and move the engine.

Runs inside the pinned image only.  Before any work: the spec is validated against the
checkpoint, the host's GPUs must be the spec's GPU kind (an engine runs only on the
architecture it was built on) and the TensorRT-LLM examples must be where the plan says.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from build_engines.checkpoint import checkpoint_hash, copy_tokenizer_files
from build_engines.engine_dir import finish_engine, staging_dir, validated_checkpoint
from build_engines.gpus import GpuTarget, detect_gpus
from build_engines.process import BuildError, run_streaming
from build_engines.progress import StepProgress
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend
from build_engines.trtllm.plan import BuildPaths, command_steps, find_examples_dir
from contract.build_record import (
    BUILD_RECORD_FILE,
    RUNTIME_PACKAGES,
    BuildRecord,
    container_version,
    installed_versions,
)

# The versions the server must match (RUNTIME_PACKAGES) and the tools of the quantize step.
BUILD_PACKAGES = RUNTIME_PACKAGES["tensorrt_llm"] + ("nvidia-modelopt", "transformers", "torch")
TOKENIZER_SUBDIR = "tokenizer"  # the engine dir's own config.json is TensorRT-LLM's
ENGINE_CONFIG = "config.json"


def has_engine_files(engine_dir: Path) -> bool:
    """trtllm-build's output: the engine config and one rank<N>.engine per GPU."""
    return (engine_dir / ENGINE_CONFIG).is_file() and any(engine_dir.glob("rank*.engine"))


def engine_is_built(engine_dir: Path) -> bool:
    return (engine_dir / BUILD_RECORD_FILE).is_file() and has_engine_files(engine_dir)


def check_host(spec: BuildSpec, detected: GpuTarget | None) -> None:
    target = spec.trtllm.gpu
    if detected is None:
        raise BuildError(
            "no NVIDIA GPU is visible (nvidia-smi found none): build TensorRT-LLM engines on the GPU "
            "host, inside the pinned image (`make build-engine` does that through docker compose)"
        )
    if detected.sm != target.sm:
        raise BuildError(
            f"the spec targets {target.describe()} but this host has {detected.describe()}: "
            "a TensorRT engine runs only on the GPU architecture it was built on"
        )
    if detected.count < spec.trtllm.world_size:
        raise BuildError(f"tp_size x pp_size = {spec.trtllm.world_size} GPUs, this host has {detected.count}")


def check_versions(spec: BuildSpec, installed: dict[str, str]) -> None:
    """The image must ship the TensorRT-LLM the spec was planned for (its conformance table)."""
    have, want = installed.get("tensorrt_llm"), spec.trtllm.trtllm_version
    if have != want:
        raise BuildError(
            f"the spec targets TensorRT-LLM {want} (Triton {spec.trtllm.triton_release}) but this image "
            f"has {have}: plan and build with --trtllm-version {have}, or build in the "
            f"{spec.trtllm.triton_release} image (TRITON_IMAGE in .env)"
        )


def build_trtllm_engine(
    spec: BuildSpec, engine_dir: Path, *, log_file: Path | None = None, keep_checkpoint: bool = False
) -> BuildRecord:
    from build_engines.trtllm.probe import runtime_versions

    progress = StepProgress(total=4 + 2 * spec.trtllm.has_draft_engine + len(spec.trtllm.lora.adapters))
    with progress.step(f"check the spec, the GPU and the tools ({spec.checkpoint})"):
        info = validated_checkpoint(spec, EngineBackend.TENSORRT_LLM)
        check_host(spec, detect_gpus())
        runtime_versions()  # TensorRT-LLM and TensorRT must import, not just be listed by pip
        versions = installed_versions(BUILD_PACKAGES) | {"container": container_version()}
        check_versions(spec, versions)
        paths = BuildPaths(
            engine_dir.with_name(engine_dir.name + ".checkpoint"), staging_dir(engine_dir), find_examples_dir()
        )
        steps = command_steps(spec, info, paths)
        script = Path(steps[0].argv[1])
        if not script.is_file():
            raise BuildError(f"{script} is missing: set TRTLLM_EXAMPLES_DIR to the TensorRT-LLM examples of this image")
        digest = checkpoint_hash(spec.checkpoint)
    if log_file:
        log_file.write_text("")
    t0 = time.monotonic()
    intermediate = (paths.checkpoint_dir, paths.draft_checkpoint_dir)
    for directory in intermediate:
        shutil.rmtree(directory, ignore_errors=True)
    for step in steps:
        with progress.step(step.title):
            run_streaming(step.argv, log_file, what=step.title, append=True)
    with progress.step(f"tokenizer files, {BUILD_RECORD_FILE}, move into place"):
        for built in (paths.engine_dir, *([paths.draft_engine_dir] if spec.trtllm.has_draft_engine else [])):
            if not has_engine_files(built):
                raise BuildError(f"trtllm-build finished but {built} has no {ENGINE_CONFIG} and rank*.engine")
        (paths.engine_dir / TOKENIZER_SUBDIR).mkdir()
        copy_tokenizer_files(spec.checkpoint, paths.engine_dir / TOKENIZER_SUBDIR)
        record = finish_engine(paths.engine_dir, engine_dir, spec, info, digest, versions, t0)
        if not keep_checkpoint:
            for directory in intermediate:
                shutil.rmtree(directory, ignore_errors=True)
    return record
