"""What `plan` prints: the steps with their exact commands, and the memory arithmetic."""

from __future__ import annotations

import shlex
from pathlib import Path

from build_engines.checkpoint import CheckpointInfo
from build_engines.gpu.capacity import CapacityError, estimate
from build_engines.gpu.limits import limit_lines
from build_engines.openvino.build import NUMERICS_FILE, measures_numerics, numerics_sweep_command
from build_engines.openvino.numerics import NumericsMode, numerics_lines, served_numerics
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend, Precision
from build_engines.trtllm.launch import serve_line
from build_engines.trtllm.options import KvCacheDtype, SpeculativeDecoding
from build_engines.trtllm.plan import BuildPaths, find_examples_dir, plan_steps
from build_engines.trtllm.rules import EffectiveConfig
from build_engines.trtllm.spec import effective
from contract.model_configs import DRAFT_SUBDIR
from contract.upstream.trtllm_build import load_build_table


def plan_lines(spec: BuildSpec, info: CheckpointInfo, engine_dir: Path) -> list[str]:
    head = [
        f"checkpoint: {spec.checkpoint} ({info.architecture}, {info.num_parameters / 1e6:.1f}M parameters, "
        f"{info.num_layers} layers, {info.num_heads} heads, {info.num_kv_heads} KV heads)",
        f"engine dir: {engine_dir}",
    ]
    if spec.backend == EngineBackend.OPENVINO:
        return head + _openvino_lines(spec, info, engine_dir) + [prompt_logprobs_line(spec, engine_dir)]
    if spec.backend == EngineBackend.TENSORRT_LLM_PYTORCH:
        from build_engines.pytorch.plan import pytorch_plan_lines

        return head + pytorch_plan_lines(spec, info, engine_dir) + [prompt_logprobs_line(spec, engine_dir)]
    return head + _trtllm_lines(spec, info, engine_dir) + [prompt_logprobs_line(spec, engine_dir)]


# Why a backend of this kit has no prompt log probs (where the deployment does not withhold them itself).
_NO_PROMPT_LOGPROBS = {
    EngineBackend.TENSORRT_LLM: "the kit builds no engine with gather_context_logits, and the engine model "
    "computes no log probs from context_logits",
    EngineBackend.TENSORRT_LLM_PYTORCH: "tensorrt_llm_pytorch does not map prompt_logprobs onto the LLM API's "
    "SamplingParams.prompt_logprobs yet",
    EngineBackend.OPENVINO: "built with --no-top-logprobs (no IR scorer)",
}


def prompt_logprobs_line(spec: BuildSpec, engine_dir: Path) -> str:
    """Whether the deployment answers prompt_logprobs (/v1/completions echo with logprobs, max_tokens 0:
    lm-evaluation-harness's loglikelihood tasks), as its engine features say."""
    from build_engines.repository import engine_features
    from contract.features import Feature

    openvino = spec.backend == EngineBackend.OPENVINO
    measured = _measured_numerics(spec, engine_dir) if openvino else {}
    engine = engine_features(spec, numerics=measured)
    if Feature.PROMPT_LOG_PROBS in engine.features:
        if openvino and spec.openvino.numerics == NumericsMode.FAST.value and not measured:
            return (
                "prompt log probs (prompt_logprobs; echo with logprobs): served by the IR scorer of top_logprobs "
                "if the setting the build chooses keeps top_logprobs (its agreement with the sampled tokens, "
                "measured by the build; `--numerics exact` always does)"
            )
        return "prompt log probs (prompt_logprobs; echo with logprobs): served, by the IR scorer of top_logprobs"
    why = dict(engine.withheld).get(Feature.PROMPT_LOG_PROBS) or _NO_PROMPT_LOGPROBS[spec.backend]
    return f"prompt log probs (prompt_logprobs; echo with logprobs): refused ({why})"


def _openvino_lines(spec: BuildSpec, info: CheckpointInfo, engine_dir: Path) -> list[str]:
    from build_engines.fidelity.evaluate import cpu_flags
    from build_engines.fidelity.plan import fidelity_plan_lines
    from build_engines.openvino.build import compress_command, export_command, fusion_command

    ov = spec.openvino
    measuring = spec.fidelity.evaluation != "off"
    measured = _measured_numerics(spec, engine_dir)
    kv = served_numerics(ov.numerics, ov.pinned_numerics(), measured).kv_cache_precision
    element = spec.kv_bytes_per_element(info, kv)
    per_token = info.kv_cache_bytes_per_token(element)
    kv_note = ""
    if ov.numerics == NumericsMode.FAST.value and measuring and not measured and kv == "f32":
        u8 = info.kv_cache_bytes_per_token(spec.kv_bytes_per_element(info, "u8"))
        kv_note = f" (until the build chooses: a u8 cache, if fast chooses it, takes {u8 / 1024:.1f} KiB/token)"
    steps = [export_command(spec, info, engine_dir)]
    if ov.draft_checkpoint:
        steps.append(export_command(spec, info, engine_dir / DRAFT_SUBDIR, Path(ov.draft_checkpoint)))
    if spec.precision == Precision.INT4:
        steps.append(compress_command(spec, engine_dir))
    if ov.fuse_projections:
        steps.append(fusion_command(engine_dir, bool(ov.draft_checkpoint)))
    if measuring and measures_numerics(spec):
        steps.append(numerics_sweep_command(spec, engine_dir, engine_dir / NUMERICS_FILE))
    lines = [f"step {n}: " + shlex.join(cmd) for n, cmd in enumerate(steps, 1)]
    return (
        lines
        + numerics_lines(ov, measuring, measured, cpu_flags())
        + [
            f"weights {spec.precision.value}" + (_int4_line(spec) if spec.precision == Precision.INT4 else ""),
            f"KV cache: {per_token / 1024:.1f} KiB/token ({kv}: {element:g} bytes/element); at most "
            f"{spec.kv_cache_bound_gb(info, kv):.2f} GB for {spec.limits.max_batch_size} x {spec.limits.max_seq_len} "
            "tokens; pool: " + (f"{ov.kv_cache_size_gb} GB" if ov.kv_cache_size_gb else "grows on demand") + kv_note,
        ]
        + fidelity_plan_lines(spec)
    )


def _measured_numerics(spec: BuildSpec, engine_dir: Path) -> dict:
    """What the built engine measured, if it is this spec's (else the build measures anew)."""
    from contract.build_record import BuildRecord, BuildRecordError

    try:
        record = BuildRecord.read(engine_dir)
        return record.numerics if spec.builds_as(record.spec) else {}
    except (BuildRecordError, TypeError, KeyError):
        return {}


def _int4_line(spec: BuildSpec) -> str:
    r = spec.openvino.int4
    if r.mode == "int4_float_zp":
        return (
            f" (u4, group {r.group_size}, float16 scale and zero point per group, data-free; token embedding "
            "and LM head int8)"
        )
    how = (
        "+".join(n for n, on in (("AWQ", r.awq), ("scale estimation", r.scale_estimation), ("GPTQ", r.gptq)) if on)
        or "data-free"
    )
    return (
        f" ({r.mode}, group {r.group_size}, {r.ratio:.0%} of layers int4, rest int8 by {r.sensitivity_metric}; "
        f"{how}; calibration {r.calibration_samples} x {r.calibration_tokens} tokens of stdlib source)"
    )


def _trtllm_lines(spec: BuildSpec, info: CheckpointInfo, engine_dir: Path) -> list[str]:
    t = spec.trtllm
    paths = BuildPaths(
        engine_dir.with_name(engine_dir.name + ".checkpoint"),
        engine_dir.with_name(engine_dir.name + ".partial"),
        find_examples_dir(),
    )
    table = load_build_table(t.trtllm_version)
    pin = table.image(t.triton_release)
    lines = [
        f"target: {t.gpu.describe()}, TP={t.tp_size} PP={t.pp_size} -> {t.world_size} rank(s), "
        f"precision {spec.precision.value}, KV cache {t.kv_cache_dtype.value}",
        f"image: {pin.image} (TensorRT-LLM {pin.trtllm_version}, TensorRT {pin.tensorrt_version}); "
        f"upstream flags and rules: {table.file}",
    ]
    lines += limit_lines(spec, info)
    lines += effective_lines(effective(spec.precision.value, t, spec.limits), spec)
    for n, step in enumerate(plan_steps(spec, info, paths), 1):
        lines.append(f"step {n}: {step.title}" + (f"\n    {step.command_line()}" if step.argv else ""))
    try:
        lines += spec_capacity_lines(spec, info)
    except CapacityError as e:
        lines.append(f"does not fit: {e}")
    lines.append(serve_line(t.world_size, 2 if t.has_draft_engine else 1))
    if t.speculative_decoding == SpeculativeDecoding.LOOKAHEAD:
        la = t.lookahead
        lines.append(
            f"speculative decoding: lookahead (W={la.window_size}, N={la.ngram_size}, G={la.verification_set_size}) "
            f"-> --max_draft_len {la.max_draft_len}; model parameters decoding_mode=lookahead and lookahead_*"
        )
    if spec.precision == Precision.FP8 and t.kv_cache_dtype == KvCacheDtype.AUTO:
        lines.append("hint: --kv-cache-dtype fp8 halves the KV cache (NVIDIA's FP8 recipe quantizes both)")
    return lines


def effective_lines(eff: EffectiveConfig, spec: BuildSpec) -> list[str]:
    """The engine as upstream's rules leave it, each override with the rule it comes from."""
    on = {True: "enable", False: "disable"}
    lines = [
        f"effective configuration (TensorRT-LLM {eff.version}): use_paged_context_fmha "
        f"{on[eff.use_paged_context_fmha]}, "
        f"use_fp8_context_fmha {on[eff.use_fp8_context_fmha]}, enable_chunked_context "
        f"{str(eff.enable_chunked_context).lower()}, enable_kv_cache_reuse {str(eff.enable_kv_cache_reuse).lower()}; "
        f"longest prompt {eff.max_prompt_len} tokens"
    ]
    lines += [f"  overridden by upstream: {o.line()}" for o in eff.overrides]
    if not eff.enable_chunked_context:
        lines.append(
            f"  chunked context and KV-cache reuse are off: a prompt longer than max_num_tokens="
            f"{spec.limits.max_num_tokens} is rejected, so max_input_len={spec.limits.max_input_len} "
            f"must (and does) fit in one engine step"
            if not eff.enable_kv_cache_reuse
            else f"  chunked context is off: a prompt longer than max_num_tokens={spec.limits.max_num_tokens} "
            "is rejected"
        )
    return lines


def spec_capacity_lines(spec: BuildSpec, info: CheckpointInfo) -> list[str]:
    return estimate(info, spec).lines(spec)
