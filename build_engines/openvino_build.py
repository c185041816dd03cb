"""Build the CPU engine: export a Llama checkpoint to OpenVINO IR with weight compression.

The export itself is optimum-intel's (`optimum-cli export openvino`), run as a child
process so its memory is returned when it ends.  The engine directory is written under a
temporary name and renamed when complete, so a half-built engine never looks usable.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from build_engines.checkpoint import CheckpointInfo, checkpoint_hash, copy_tokenizer_files
from build_engines.engine_dir import finish_engine, staging_dir, validated_checkpoint
from build_engines.process import BuildError, run_streaming
from build_engines.progress import StepProgress
from build_engines.spec import BuildSpec, EngineBackend, Precision
from contract.build_record import BUILD_RECORD_FILE, BuildRecord, installed_versions

BUILD_PACKAGES = ("openvino", "openvino-genai", "openvino-tokenizers", "optimum-intel", "optimum", "nncf",
                  "transformers", "torch")
IR_MODEL_FILE = "openvino_model.xml"
INT4_GROUP_SIZE = 128

__all__ = ["BuildError", "build_openvino_engine", "engine_is_built", "export_command"]


def export_command(spec: BuildSpec, info: CheckpointInfo, out_dir: Path) -> list[str]:
    """The exact optimum-cli invocation for this spec."""
    cmd = [sys.executable, "-m", "optimum.commands.optimum_cli", "export", "openvino",
           "--model", str(spec.checkpoint), "--task", "text-generation-with-past",
           "--weight-format", spec.precision.value]
    if spec.precision == Precision.INT4:
        # Group-wise int4 needs the group to divide every input dimension it compresses.
        group = INT4_GROUP_SIZE
        while group > 16 and (info.hidden_size % group or info.intermediate_size % group):
            group //= 2
        cmd += ["--group-size", str(group), "--ratio", "1.0"]
    cmd.append(str(out_dir))
    return cmd


def engine_is_built(engine_dir: Path) -> bool:
    return (engine_dir / BUILD_RECORD_FILE).is_file() and (engine_dir / IR_MODEL_FILE).is_file()


def build_openvino_engine(spec: BuildSpec, engine_dir: Path, *, log_file: Path | None = None) -> BuildRecord:
    progress = StepProgress(total=3)
    with progress.step(f"inspect checkpoint {spec.checkpoint}"):
        info = validated_checkpoint(spec, EngineBackend.OPENVINO)
        digest = checkpoint_hash(spec.checkpoint)

    staging = staging_dir(engine_dir)
    cmd = export_command(spec, info, staging)
    t0 = time.monotonic()
    with progress.step(f"export to OpenVINO IR ({spec.precision.value} weights)"):
        run_streaming(cmd, log_file, what="export")
        if not (staging / IR_MODEL_FILE).is_file():
            raise BuildError(f"the exporter finished but wrote no {IR_MODEL_FILE} in {staging}")
        copy_tokenizer_files(spec.checkpoint, staging)

    with progress.step(f"write {BUILD_RECORD_FILE} and move into place"):
        record = finish_engine(staging, engine_dir, spec, info, digest, installed_versions(BUILD_PACKAGES), t0)
    return record
