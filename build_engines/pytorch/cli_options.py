"""The shared `plan`/`build` command-line options as a PyTorch-backend spec section.  Options of
the engine flow that mean nothing without an engine are refused when set, naming them."""

from __future__ import annotations

from build_engines.gpus import GpuTarget
from build_engines.pytorch.sampler import SamplerChoice, parse_sampling_fields
from build_engines.pytorch.spec import PyTorchOptions, PyTorchServing
from build_engines.pytorch.speculative import PyTorchSpeculative
from build_engines.spec_base import SpecError
from build_engines.trtllm.options import (
    GuidedDecodingBackend,
    KvCacheDtype,
    SchedulerPolicy,
    SpeculativeDecoding,
    TrtLlmOptions,
    TrtLlmServing,
)
from build_engines.trtllm.versions import TrtllmTargetError, resolve_target

# --option -> (make_spec keyword, its default): trtllm-build and C++-backend settings.
ENGINE_ONLY = {
    "--no-paged-context-fmha": ("paged_context_fmha", TrtLlmOptions().use_paged_context_fmha),
    "--scheduler-policy": ("scheduler_policy", TrtLlmServing().batch_scheduler_policy.value),
    "--max-queue-delay-us": ("max_queue_delay_us", TrtLlmServing().max_queue_delay_microseconds),
    "--speculative-decoding": ("speculative_decoding", SpeculativeDecoding.NONE.value),
    "--lookahead": ("lookahead", None),
    "--eagle-model-dir": ("eagle_model_dir", None),
    "--eagle-tree": ("eagle_tree", None),
    "--eagle-choices": ("eagle_choices", None),
}


def pytorch_options(
    *,
    triton_image: str | None,
    trtllm_version: str | None,
    tp_size: int,
    pp_size: int,
    kv_cache_dtype: str,
    calib_dataset: str | None,
    calib_size: int,
    gpu: GpuTarget,
    kv_cache_fraction: float,
    kv_cache_reuse: bool,
    chunked_context: bool,
    max_queue_size: int,
    queue_timeout_s: float,
    speculative: PyTorchSpeculative | None = None,
    guided_decoding: str = GuidedDecodingBackend.XGRAMMAR.value,
    sampler: str = SamplerChoice.AUTO.value,
    sampling_fields: str = "",
    **engine_only,
) -> PyTorchOptions:
    set_ = [flag for flag, (key, default) in ENGINE_ONLY.items() if engine_only.get(key, default) != default]
    if set_:
        raise SpecError(f"{set_} configure a compiled engine; --backend tensorrt_llm_pytorch compiles none")
    try:
        target = resolve_target(triton_image, trtllm_version)
    except TrtllmTargetError as e:
        raise SpecError(str(e)) from None
    try:
        fields = parse_sampling_fields(sampling_fields)
    except ValueError as e:
        raise SpecError(str(e)) from None
    return PyTorchOptions(
        trtllm_version=target.version,
        triton_release=target.release,
        tp_size=tp_size,
        pp_size=pp_size,
        kv_cache_dtype=KvCacheDtype(kv_cache_dtype),
        calib_dataset=calib_dataset,
        calib_size=calib_size,
        gpu=gpu,
        speculative=speculative or PyTorchSpeculative(),
        sampler=SamplerChoice(sampler),
        sampling_fields=fields,
        serving=PyTorchServing(
            kv_cache_free_gpu_mem_fraction=kv_cache_fraction,
            enable_block_reuse=kv_cache_reuse,
            enable_chunked_prefill=chunked_context,
            max_queue_size=max_queue_size,
            queue_timeout_s=queue_timeout_s,
            guided_decoding_backend=GuidedDecodingBackend(guided_decoding),
        ),
    )


assert SchedulerPolicy(ENGINE_ONLY["--scheduler-policy"][1])  # the default stays a valid policy
