"""The TensorRT-LLM part of the build spec: parallelism, KV cache, plugins, calibration, the
target GPU and TensorRT-LLM version, and the serving settings of the `tensorrt_llm` Triton model.

Every rule that can be checked before a GPU is touched is checked here, and every message
names the fields involved: our own rules, then upstream's implicit rules for the spec's
TensorRT-LLM version (build_engines/trtllm/rules.py, from the conformance table), so that
what upstream would refuse after calibration is refused at plan time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from build_engines.gpus import FP8_MIN_SM, MIN_SM
from build_engines.trtllm.draft_target import draft_target_problems
from build_engines.trtllm.eagle import eagle_problems
from build_engines.trtllm.options import GpuOptions, KvCacheDtype, SpeculativeDecoding, TrtLlmOptions
from build_engines.trtllm.rules import WEIGHT_FORMAT, EffectiveConfig, checkpoint_parallelism_problems, effective_config
from contract.upstream.trtllm_build import load_build_table, supported_versions

if TYPE_CHECKING:
    from build_engines.checkpoint import CheckpointInfo


# Formats whose scales come from running calibration data through the model (ModelOpt PTQ).
CALIBRATED_PRECISIONS = ("fp8", "int8_sq", "int4_awq")


def needs_calibration(precision: str, options: TrtLlmOptions) -> bool:
    return precision in CALIBRATED_PRECISIONS or options.kv_cache_dtype != KvCacheDtype.AUTO


def effective(precision: str, o: TrtLlmOptions, limits) -> EffectiveConfig:
    """The engine this spec really gets, after the implicit rules of its TensorRT-LLM version."""
    return effective_config(
        load_build_table(o.trtllm_version),
        WEIGHT_FORMAT[precision],
        o,
        limits.max_seq_len,
        limits.max_num_tokens,
        limits.max_input_len,
    )


def trtllm_problems(precision: str, o: TrtLlmOptions, limits, info: "CheckpointInfo | None") -> list[str]:
    """Every rule broken by this combination, each naming its fields."""
    if o.trtllm_version not in supported_versions():
        return [
            f"'trtllm_version' {o.trtllm_version!r} has no conformance table; supported: {supported_versions()} "
            "(give --trtllm-version or --image, or set TRITON_IMAGE in .env)"
        ]
    errors = parallelism_problems(o, info) + gpu_problems(precision, o)
    releases = [pin.release for pin in load_build_table(o.trtllm_version).images]
    if o.triton_release not in releases:
        errors.append(
            f"'triton_release' {o.triton_release!r} does not ship TensorRT-LLM {o.trtllm_version}; "
            f"releases that do: {releases}"
        )
    if needs_calibration(precision, o) and not o.calib_dataset:
        what = (
            f"precision {precision!r}"
            if precision in CALIBRATED_PRECISIONS
            else f"kv_cache_dtype {o.kv_cache_dtype.value!r}"
        )
        errors.append(
            f"'calib_dataset' is required for {what}: its scales are calibrated on sample text "
            "(give a Hugging Face dataset name such as cnn_dailymail, or a local directory)"
        )
    if o.calib_size < 1 or o.calib_max_seq_length < 1:
        errors.append("'calib_size' and 'calib_max_seq_length' must be >= 1")
    if (
        precision == "int4_awq"
        and info is not None
        and (info.hidden_size % o.awq_block_size or info.intermediate_size % o.awq_block_size)
    ):
        errors.append(
            f"'awq_block_size' {o.awq_block_size} must divide hidden_size {info.hidden_size} "
            f"and intermediate_size {info.intermediate_size}"
        )
    if not o.paged_kv_cache:
        errors.append(
            "'paged_kv_cache' must be true: the in-flight batcher (gpt_model_type=inflight_fused_batching) needs it"
        )
    s = o.serving
    for name in ("enable_kv_cache_reuse", "enable_chunked_context"):
        if getattr(s, name) and not o.use_paged_context_fmha:
            errors.append(f"'{name}' needs 'use_paged_context_fmha' (trtllm-build --use_paged_context_fmha enable)")
    if not 0 < s.kv_cache_free_gpu_mem_fraction <= 1:
        errors.append(f"'kv_cache_free_gpu_mem_fraction' must be in (0, 1], got {s.kv_cache_free_gpu_mem_fraction}")
    if s.queue_timeout_s < 0:
        errors.append(f"'queue_timeout_s' must be >= 0 (0: never), got {s.queue_timeout_s}")
    if s.max_queue_delay_microseconds < 0 or s.max_queue_size < 0 or s.cancellation_check_period_ms < 1:
        errors.append(
            "'max_queue_delay_microseconds' and 'max_queue_size' must be >= 0, 'cancellation_check_period_ms' >= 1"
        )
    if o.plugins.reduce_fusion and o.tp_size == 1:
        errors.append("'reduce_fusion' fuses the AllReduce of tensor parallelism: it needs 'tp_size' > 1")
    if o.speculative_decoding == SpeculativeDecoding.LOOKAHEAD:
        errors += o.lookahead.problems()
    if o.speculative_decoding == SpeculativeDecoding.EAGLE:
        errors += eagle_problems(
            load_build_table(o.trtllm_version),
            o.eagle,
            precision,
            o.kv_cache_dtype.value,
            o.pp_size,
            limits.max_batch_size,
        )
    if precision in WEIGHT_FORMAT:  # the rest is BuildSpec.validate's error
        eff = effective(precision, o, limits)
        errors += list(eff.refusals)
        if o.speculative_decoding == SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL:
            errors += draft_target_problems(load_build_table(o.trtllm_version), o, precision, limits, info, eff)
    return errors


def parallelism_problems(o: GpuOptions, info: "CheckpointInfo | None") -> list[str]:
    """TP/PP against the checkpoint and the GPUs (also for the PyTorch backend's options, which
    carry the same fields)."""
    if o.tp_size < 1 or o.pp_size < 1:
        return [f"'tp_size' and 'pp_size' must be >= 1, got {o.tp_size} and {o.pp_size}"]
    errors = []
    if info is not None:
        errors += checkpoint_parallelism_problems(load_build_table(o.trtllm_version), info, o.tp_size, o.pp_size)
    if o.world_size > o.gpu.count:
        errors.append(
            f"'tp_size' x 'pp_size' = {o.world_size} GPUs, but 'gpu_count' is {o.gpu.count} ({o.gpu.describe()})"
        )
    return errors


def gpu_problems(precision: str, o: GpuOptions) -> list[str]:
    gpu = o.gpu
    if gpu.sm < MIN_SM:
        return [
            f"'gpu' {gpu.name} is SM {gpu.sm / 10:.1f} ({gpu.architecture}); TensorRT-LLM {o.trtllm_version} needs "
            f"SM {MIN_SM / 10:.1f} (Ampere) or newer"
        ]
    errors = []
    for what, wants_fp8 in (
        (f"'precision' {precision!r}", precision == "fp8"),
        ("'kv_cache_dtype' 'fp8'", o.kv_cache_dtype == KvCacheDtype.FP8),
    ):
        if wants_fp8 and gpu.sm < FP8_MIN_SM:
            errors.append(
                f"{what} needs an Ada Lovelace (SM 8.9) or Hopper (SM 9.0) GPU or newer; "
                f"'gpu' {gpu.name} is SM {gpu.sm / 10:.1f} ({gpu.architecture})"
            )
    return errors
