"""The exact steps that turn a Hugging Face Llama checkpoint into a TensorRT-LLM engine.

Step 1 writes a TensorRT-LLM checkpoint: `convert_checkpoint.py` for 16-bit and INT8
weight-only weights, ModelOpt's `quantize.py` for formats calibrated on sample text (FP8,
INT8 SmoothQuant, INT4 AWQ, and any quantized KV cache).  Step 2 compiles it with
`trtllm-build`.  Both are TensorRT-LLM's own tools, run as child processes inside the
pinned image, so each step returns its GPU memory when it ends and a user can rerun a
printed command by hand.

Every argv is checked against the conformance table of the spec's TensorRT-LLM version
(contract/upstream/data/trtllm_build_<version>.json: the flags and accepted values of
trtllm-build, quantize.py and the Llama convert_checkpoint.py), and the trtllm-build switches
are the *effective* ones (build_engines/trtllm/rules.py): the plan never emits a setting that
upstream's implicit rules would override.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from build_engines.checkpoint import CheckpointInfo
from build_engines.spec import BuildSpec
from build_engines.spec_base import Precision
from build_engines.trtllm.draft_target import DRAFT_ENGINE_SUBDIR, read_draft
from build_engines.trtllm.eagle import TOOL as TOOL_EAGLE
from build_engines.trtllm.eagle import convert_argv as eagle_convert_argv
from build_engines.trtllm.lora import build_flags, convert_argv
from build_engines.trtllm.options import KvCacheDtype, SpeculativeDecoding
from build_engines.trtllm.rules import WEIGHT_FORMAT
from build_engines.trtllm.spec import CALIBRATED_PRECISIONS, effective
from contract.kv_cache import TOKENS_PER_BLOCK
from contract.upstream.trtllm_build import load_build_table

# Where the TensorRT-LLM examples live inside the image (tensorrtllm_backend's Dockerfile
# copies them to /app/examples; older NGC images had /app/tensorrt_llm/examples).
EXAMPLES_DIR_VARIABLE = "TRTLLM_EXAMPLES_DIR"
EXAMPLES_DIR_CANDIDATES = (Path("/app/examples"), Path("/app/tensorrt_llm/examples"))
QUANTIZE_SCRIPT = Path("quantization/quantize.py")
CONVERT_SCRIPT = Path("models/core/llama/convert_checkpoint.py")
TRTLLM_BUILD = "trtllm-build"

# Our precision -> quantize.py --qformat.
QFORMAT = {Precision(precision): qformat for precision, qformat in WEIGHT_FORMAT.items()}
# The tools of the conformance table.
TOOL_QUANTIZE, TOOL_CONVERT, TOOL_BUILD = "quantize", "convert_checkpoint", TRTLLM_BUILD


class ConformanceError(RuntimeError):
    """A planned command that the pinned tools would reject: a bug of this kit, never of the spec."""


@dataclass(frozen=True)
class Step:
    title: str
    argv: tuple[str, ...]  # empty for a step this kit does in-process
    tool: str = ""  # the conformance-table tool the argv runs
    cwd: str = ""  # the directory it runs in ("" = the caller's)

    def command_line(self) -> str:
        return (f"cd {shlex.quote(self.cwd)} && " if self.cwd else "") + shlex.join(self.argv)


@dataclass(frozen=True)
class BuildPaths:
    checkpoint_dir: Path  # TensorRT-LLM checkpoint written by step 1 (deleted after the build)
    engine_dir: Path  # where trtllm-build writes; renamed into place when everything succeeded
    examples_dir: Path

    @property
    def draft_checkpoint_dir(self) -> Path:
        """The draft model's TensorRT-LLM checkpoint (draft-target decoding; deleted like the target's)."""
        return self.checkpoint_dir.with_name(self.checkpoint_dir.name + ".draft")

    @property
    def draft_engine_dir(self) -> Path:
        return self.engine_dir / DRAFT_ENGINE_SUBDIR

    def checkpoint_and_engine(self, draft: bool) -> tuple[Path, Path]:
        """The TensorRT-LLM checkpoint and engine directories of the target, or of the draft model."""
        return (self.draft_checkpoint_dir, self.draft_engine_dir) if draft else (self.checkpoint_dir, self.engine_dir)


def find_examples_dir(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(EXAMPLES_DIR_VARIABLE):
        return Path(env[EXAMPLES_DIR_VARIABLE])
    for candidate in EXAMPLES_DIR_CANDIDATES:
        if (candidate / QUANTIZE_SCRIPT).is_file():
            return candidate
    return EXAMPLES_DIR_CANDIDATES[0]


def model_dtype(spec: BuildSpec, info: CheckpointInfo) -> str:
    """Dtype of everything that is not quantized: the precision's for 16-bit builds,
    otherwise the checkpoint's (bfloat16 stays bfloat16, anything else becomes float16)."""
    if spec.precision == Precision.BF16:
        return "bfloat16"
    if spec.precision == Precision.FP16:
        return "float16"
    return "bfloat16" if info.dtype == "bfloat16" else "float16"


def uses_modelopt(spec: BuildSpec) -> bool:
    return spec.precision.value in CALIBRATED_PRECISIONS or spec.trtllm.kv_cache_dtype != KvCacheDtype.AUTO


def checkpoint_step(spec: BuildSpec, info: CheckpointInfo, paths: BuildPaths, draft: bool = False) -> Step:
    """The Hugging Face checkpoint into a TensorRT-LLM checkpoint; `draft`: the draft model of
    draft-target decoding (`info` its own), with the same tool and flags."""
    t = spec.trtllm
    model_dir = Path(t.draft_target.draft_checkpoint) if draft else spec.checkpoint
    of = "the draft model: " if draft else ""
    common = (
        "--model_dir",
        str(model_dir),
        "--output_dir",
        str(paths.checkpoint_and_engine(draft)[0]),
        "--dtype",
        model_dtype(spec, info),
        "--tp_size",
        str(t.tp_size),
        "--pp_size",
        str(t.pp_size),
    )
    if uses_modelopt(spec):
        argv: tuple[str, ...] = (
            "python3",
            str(paths.examples_dir / QUANTIZE_SCRIPT),
            *common,
            "--qformat",
            QFORMAT[spec.precision],
            "--calib_dataset",
            str(t.calib_dataset),
            "--calib_size",
            str(t.calib_size),
            "--calib_max_seq_length",
            str(t.calib_max_seq_length),
        )
        if t.kv_cache_dtype != KvCacheDtype.AUTO:
            argv += ("--kv_cache_dtype", t.kv_cache_dtype.value)
        if spec.precision == Precision.INT4_AWQ:
            argv += ("--awq_block_size", str(t.awq_block_size))
        return Step(
            f"{of}quantize ({QFORMAT[spec.precision]}, calibrated on {t.calib_dataset}) into a TensorRT-LLM checkpoint",
            argv,
            TOOL_QUANTIZE,
        )
    if t.speculative_decoding == SpeculativeDecoding.EAGLE:  # build_engines/trtllm/eagle.py
        argv = eagle_convert_argv(
            t.eagle,
            paths.examples_dir,
            spec.checkpoint,
            paths.checkpoint_dir,
            model_dtype(spec, info),
            t.tp_size,
            t.pp_size,
            t.world_size,
        )
        return Step("convert the checkpoint and its EAGLE heads into one TensorRT-LLM checkpoint", argv, TOOL_EAGLE)
    argv = ("python3", str(paths.examples_dir / CONVERT_SCRIPT), *common, "--workers", str(t.world_size))
    if spec.precision == Precision.INT8_WO:
        argv += ("--use_weight_only", "--weight_only_precision", "int8")
    return Step(f"{of}convert the Hugging Face checkpoint into a TensorRT-LLM checkpoint", argv, TOOL_CONVERT)


def _switch(on: bool) -> str:
    return "enable" if on else "disable"


def engine_step(spec: BuildSpec, paths: BuildPaths, draft: bool = False) -> Step:
    """trtllm-build with the effective switches: what upstream's rules leave of what we ask.
    `draft`: the draft model's engine into <engine>/draft, with the same switches and limits but
    no speculative decoding and no LoRA (row draft_target_requirements)."""
    t, limits, p = spec.trtllm, spec.limits, spec.trtllm.plugins
    eff = effective(spec.precision.value, t, limits)
    checkpoint_dir, engine_dir = paths.checkpoint_and_engine(draft)
    argv: tuple[str, ...] = (
        TRTLLM_BUILD,
        "--checkpoint_dir",
        str(checkpoint_dir),
        "--output_dir",
        str(engine_dir),
        "--max_batch_size",
        str(limits.max_batch_size),
        "--max_input_len",
        str(limits.max_input_len),
        "--max_seq_len",
        str(limits.max_seq_len),
        "--max_num_tokens",
        str(limits.max_num_tokens),
        "--max_beam_width",
        "1",
        "--kv_cache_type",
        "paged" if t.paged_kv_cache else "continuous",
        "--tokens_per_block",
        str(TOKENS_PER_BLOCK),
        "--gpt_attention_plugin",
        "auto",
        "--gemm_plugin",
        "auto" if p.gemm_plugin else "disable",
        "--context_fmha",
        _switch(eff.context_fmha),
        "--remove_input_padding",
        _switch(p.remove_input_padding),
        "--use_paged_context_fmha",
        _switch(eff.use_paged_context_fmha),
        "--use_fp8_context_fmha",
        _switch(eff.use_fp8_context_fmha),
        "--use_fused_mlp",
        _switch(p.use_fused_mlp),
        "--multiple_profiles",
        _switch(p.multiple_profiles),
    )
    if eff.reduce_fusion:
        argv += ("--reduce_fusion", "enable")
    if draft:
        return Step(
            f"compile the draft model's engine into <engine>/{DRAFT_ENGINE_SUBDIR} for {t.gpu.describe()}",
            argv + ("--workers", str(t.world_size)),
            TOOL_BUILD,
        )
    tokens = _draft_tokens(spec)
    if tokens is not None:
        argv += ("--speculative_decoding_mode", t.speculative_decoding.value, "--max_draft_len", str(tokens[0]))
    if t.lora.enabled:  # build_engines/trtllm/lora.py
        argv += build_flags(t.lora)
    argv += ("--workers", str(t.world_size))
    return Step(f"compile the engine for {t.gpu.describe()}{_speculative_growth(spec)}", argv, TOOL_BUILD)


def _draft_tokens(spec: BuildSpec) -> tuple[int, int] | None:
    """A speculative engine's --max_draft_len and the tree layers the builder also adds to
    max_seq_len (lookahead: trtllm_spec.LOOKAHEAD_CITATIONS; eagle: build_engines/trtllm/eagle.py;
    draft_tokens_external: build_engines/trtllm/draft_target.py)."""
    t = spec.trtllm
    if t.speculative_decoding == SpeculativeDecoding.LOOKAHEAD:
        return t.lookahead.max_draft_len, 0
    if t.speculative_decoding == SpeculativeDecoding.EAGLE:
        return t.eagle.max_draft_len, t.eagle.num_eagle_layers
    if t.speculative_decoding == SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL:
        return t.draft_target.max_draft_len, 0
    return None


def _speculative_growth(spec: BuildSpec) -> str:
    """What the builder adds to the limits for a speculative engine (row speculative_decoding_grows_limits)."""
    draft = _draft_tokens(spec)
    if draft is None:
        return ""
    limits = spec.limits
    tokens = max(limits.max_num_tokens, limits.max_batch_size * (draft[0] + 1))
    return (
        f" (the builder makes max_seq_len {limits.max_seq_len + sum(draft)} and max_num_tokens {tokens} for the "
        "draft tokens: row speculative_decoding_grows_limits)"
    )


def lora_steps(spec: BuildSpec, paths: BuildPaths, dtype: str) -> list[Step]:
    """Each LoRA adapter converted into the engine's prefetch directory (hf_lora_convert.py
    is an example script, not a table tool: its arguments are cited in trtllm_lora.py)."""
    lora = spec.trtllm.lora
    argvs = convert_argv(lora, paths.examples_dir, paths.engine_dir, dtype, spec.trtllm.trtllm_version)
    return [
        Step(f"convert LoRA adapter {name} (task {i})", argv)
        for i, (name, argv) in enumerate(zip(lora.adapters, argvs), start=1)
    ]


def checked(spec: BuildSpec, step: Step) -> Step:
    """`step`, once its argv is known to be accepted by the tools of the spec's TensorRT-LLM version."""
    if step.tool:
        problems = load_build_table(spec.trtllm.trtllm_version).check_argv(step.tool, step.argv[1:])
        if problems:
            raise ConformanceError(
                f"the plan for TensorRT-LLM {spec.trtllm.trtllm_version} is not what its tools "
                "accept: " + "; ".join(problems)
            )
    return step


def command_steps(spec: BuildSpec, info: CheckpointInfo, paths: BuildPaths) -> list[Step]:
    """The commands of a build, in order, each checked against the version's tools: the target's
    checkpoint and engine, the draft model's (draft-target decoding), the LoRA adapters."""
    steps = [checkpoint_step(spec, info, paths), engine_step(spec, paths)]
    if spec.trtllm.has_draft_engine:
        steps += [
            checkpoint_step(spec, read_draft(spec.trtllm.draft_target), paths, draft=True),
            engine_step(spec, paths, draft=True),
        ]
    return [checked(spec, step) for step in steps] + lora_steps(spec, paths, model_dtype(spec, info))


def plan_steps(spec: BuildSpec, info: CheckpointInfo, paths: BuildPaths) -> list[Step]:
    draft = ", tensorrt_llm_draft" if spec.trtllm.has_draft_engine else ""
    return [
        *command_steps(spec, info, paths),
        Step(
            "copy the tokenizer files into <engine>/tokenizer, write build.json (spec, versions, checkpoint hash), "
            "move the engine into place, delete the intermediate checkpoint" + ("s" if draft else ""),
            (),
        ),
        Step(
            f"render the Triton model repository (ensemble, preprocessing, engine_relay, tensorrt_llm{draft}, "
            "postprocessing, tensorrt_llm_bls)",
            (),
        ),
    ]
