"""Build for TensorRT-LLM's PyTorch backend: no engine compile.

The engine directory holds `model/` - the Hugging Face checkpoint the LLM loads: the input
as it is (16-bit, or quantized by ModelOpt already), or ModelOpt's quantized export of it -
and build.json.  Copying needs no GPU and no TensorRT-LLM, so a 16-bit or pre-quantized
checkpoint is prepared on any machine; quantizing runs ModelOpt's hf_ptq.py inside the
pinned image, on a GPU (ModelOpt table rule gpu_required).

build.json records the TensorRT-LLM version the directory is prepared for (the target's,
checked against the image's when quantizing), so the server refuses it under another
version, naming both (contract/build_record.py).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from build_engines.checkpoint import TOKENIZER_FILES, WEIGHT_SUFFIXES, checkpoint_hash, copy_tokenizer_files
from build_engines.checkpoint_quant import HF_QUANT_CONFIG, read_quantization
from build_engines.engine_dir import finish_engine, staging_dir, validated_checkpoint
from build_engines.gpus import detect_gpus
from build_engines.process import BuildError, run_streaming
from build_engines.progress import StepProgress
from build_engines.pytorch.plan import pytorch_steps
from build_engines.pytorch.repository import MODEL_SUBDIR
from build_engines.pytorch.spec import needs_quantization
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend
from contract.build_record import (
    BUILD_RECORD_FILE,
    BuildRecord,
    container_version,
    installed_versions,
)
from contract.upstream.modelopt import modelopt_for_trtllm

BUILD_PACKAGES = ("tensorrt_llm", "nvidia-modelopt", "transformers", "torch")
# Files of a checkpoint the LLM needs beside the weights (weights: *.safetensors/*.bin and their index).
MODEL_FILES = TOKENIZER_FILES + (HF_QUANT_CONFIG,)


def engine_is_built(engine_dir: Path) -> bool:
    return (engine_dir / BUILD_RECORD_FILE).is_file() and (engine_dir / MODEL_SUBDIR / "config.json").is_file()


def copy_checkpoint(checkpoint: Path, out: Path) -> list[str]:
    """The checkpoint's weights, index, config, tokenizer and quantization files (nothing else)."""
    out.mkdir(parents=True)
    names = []
    for item in sorted(checkpoint.iterdir()):
        wanted = item.suffix in WEIGHT_SUFFIXES or item.name.endswith(".index.json") or item.name in MODEL_FILES
        if item.is_file() and wanted:
            shutil.copyfile(item, out / item.name)
            names.append(item.name)
    return names


def complete_tokenizer(checkpoint: Path, exported: Path) -> None:
    """What ModelOpt's export may leave out (chat template, generation config), never over its own files."""
    for name in TOKENIZER_FILES:
        if (checkpoint / name).is_file() and not (exported / name).exists():
            shutil.copyfile(checkpoint / name, exported / name)


def check_quantizer(spec: BuildSpec, versions: dict[str, str]) -> None:
    """hf_ptq.py must run on a GPU, in the image of the target TensorRT-LLM, with the ModelOpt it pins."""
    want, table = spec.pytorch.trtllm_version, modelopt_for_trtllm(spec.pytorch.trtllm_version)
    if detect_gpus() is None:
        raise BuildError(
            "quantizing runs ModelOpt on a GPU (none is visible here): build inside the GPU image on "
            "the GPU host (`make build-engine` does that), or give a 16-bit or ModelOpt checkpoint"
        )
    if versions.get("tensorrt_llm") != want:
        raise BuildError(
            f"the spec targets TensorRT-LLM {want} but this image has {versions.get('tensorrt_llm')}: "
            f"build in the {spec.pytorch.triton_release} image (TRITON_IMAGE in .env)"
        )
    have = versions.get("nvidia-modelopt", "")
    if have.rsplit(".", 1)[0] != table.version.rsplit(".", 1)[0]:
        raise BuildError(f"ModelOpt {have} is installed; TensorRT-LLM {want} pins {table.requirement}")


def build_pytorch_engine(spec: BuildSpec, engine_dir: Path, *, log_file: Path | None = None) -> BuildRecord:
    progress = StepProgress(total=3)
    with progress.step(f"check the spec and the checkpoint ({spec.checkpoint})"):
        info = validated_checkpoint(spec, EngineBackend.TENSORRT_LLM_PYTORCH)
        quant = read_quantization(spec.checkpoint)
        quantize = needs_quantization(spec.precision.value, quant)
        versions = installed_versions(BUILD_PACKAGES) | {"container": container_version()}
        if quantize:
            check_quantizer(spec, versions)
        versions["tensorrt_llm"] = spec.pytorch.trtllm_version  # what the directory is prepared for
        staging = staging_dir(engine_dir)
        step = pytorch_steps(spec, info, quant, staging)[1]
        digest = checkpoint_hash(spec.checkpoint)
    t0 = time.monotonic()
    with progress.step(step.title):
        if quantize:
            staging.mkdir()
            run_streaming(step.argv, log_file, what=step.title, cwd=step.cwd)
            complete_tokenizer(spec.checkpoint, staging / MODEL_SUBDIR)
        else:
            copy_checkpoint(spec.checkpoint, staging / MODEL_SUBDIR)
            copy_tokenizer_files(spec.checkpoint, staging / MODEL_SUBDIR)  # fails if there is no tokenizer
    with progress.step(f"{BUILD_RECORD_FILE}, move into place"):
        if not (staging / MODEL_SUBDIR / "config.json").is_file():
            raise BuildError(f"{step.title} finished but {staging / MODEL_SUBDIR} has no config.json")
        return finish_engine(staging, engine_dir, spec, info, digest, versions, t0)
