"""The engine model's parameters as the LLM's constructor keywords.

Keywords are TorchLlmArgs fields (upstream rows llm.args.fields, kv_cache_config.fields:
the LLM validates them with extra='forbid', so a misspelt one fails at load).  The KV-cache
class is handed in (tensorrt_llm.llmapi.KvCacheConfig in the image, the stand-in's in tests).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from contract import lora
from contract.model_configs import KvCacheDtype, PyTorchEngineParameters


def kv_cache_kwargs(p: PyTorchEngineParameters) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "free_gpu_memory_fraction": p.kv_cache_free_gpu_mem_fraction,
        "enable_block_reuse": p.enable_block_reuse,
    }
    if p.kv_cache_dtype != KvCacheDtype.AUTO:  # 'auto' (the default) follows the checkpoint
        kwargs["dtype"] = p.kv_cache_dtype.value
    return kwargs


# decoding_type -> the tensorrt_llm.llmapi class (build_engines/pytorch/speculative.py CONFIG_CLASS).
SPECULATIVE_CLASSES = {
    "NGram": "NGramDecodingConfig",
    "Draft_Target": "DraftTargetDecodingConfig",
    "Eagle": "EagleDecodingConfig",
}


def speculative_kwargs(p: PyTorchEngineParameters) -> tuple[str, dict[str, Any]] | None:
    """(class name, its keywords) of the speculative config, or None without one."""
    data = json.loads(p.speculative_config or "{}")
    if not data:
        return None
    decoding_type = data.pop("decoding_type")
    if decoding_type not in SPECULATIVE_CLASSES:
        raise ValueError(
            f"'speculative_config' decoding_type {decoding_type!r}; allowed: {sorted(SPECULATIVE_CLASSES)}"
        )
    return SPECULATIVE_CLASSES[decoding_type], data


def lora_config_kwargs(p: PyTorchEngineParameters) -> dict[str, Any] | None:
    """LoraConfig(**these) for the served adapters (row llm.lora), None without any: every adapter
    may be resident at once (max_loras = max_cpu_loras = their number)."""
    adapters = lora.from_parameter(p.lora_adapters)
    if not adapters:
        return None
    return {
        "lora_dir": [str(Path(a.weights).parent) for a in adapters],
        "max_lora_rank": p.lora_max_rank,
        "max_loras": len(adapters),
        "max_cpu_loras": len(adapters),
    }


def llm_kwargs(
    p: PyTorchEngineParameters,
    kv_cache_config: Callable[..., Any],
    speculative_config: Callable[..., Any] | None = None,
    lora_config: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """`speculative_config(class_name, **fields)` builds the decoding config (getattr(tensorrt_llm.llmapi, name));
    `lora_config(**fields)` the LoraConfig."""
    kwargs = _base_kwargs(p, kv_cache_config)
    lora_fields = lora_config_kwargs(p)
    if lora_fields is not None:
        if lora_config is None:
            raise ValueError("'lora_adapters' is set but no LoraConfig factory was given")
        kwargs["lora_config"] = lora_config(**lora_fields)
    spec = speculative_kwargs(p)
    if spec is not None:
        if speculative_config is None:
            raise ValueError("'speculative_config' is set but no factory was given to build it")
        kwargs["speculative_config"] = speculative_config(spec[0], **spec[1])
    return kwargs


def _base_kwargs(p: PyTorchEngineParameters, kv_cache_config: Callable[..., Any]) -> dict[str, Any]:
    return {
        "model": str(p.model_dir),
        "backend": "pytorch",  # as NVIDIA's model.yaml says it (row triton.model_yaml)
        # preprocessing tokenizes; end_id is always explicit (row llm.end_id.setup); guided decoding
        # needs the LLM's tokenizer all the same (row llm.guided.tokenizer)
        "skip_tokenizer_init": not p.guided_decoding_backend,
        "dtype": p.dtype,
        "tensor_parallel_size": p.tensor_parallel_size,
        "pipeline_parallel_size": p.pipeline_parallel_size,
        "max_batch_size": p.max_batch_size,
        "max_num_tokens": p.max_num_tokens,
        "max_seq_len": p.max_seq_len,
        "enable_chunked_prefill": p.enable_chunked_prefill,
        "enable_iter_perf_stats": True,  # KV-cache usage for llm_kv_cache_usage_ratio (row llm.get_stats_async)
        "sampler_type": p.sampler_type,  # the plan's choice (build_engines/pytorch/sampler.py; row llm.args.fields)
        "kv_cache_config": kv_cache_config(**kv_cache_kwargs(p)),
    } | ({"guided_decoding_backend": p.guided_decoding_backend} if p.guided_decoding_backend else {})
