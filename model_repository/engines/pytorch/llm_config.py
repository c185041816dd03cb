"""The engine model's parameters as the LLM's constructor keywords.

Keywords are TorchLlmArgs fields (upstream rows llm.args.fields, kv_cache_config.fields:
the LLM validates them with extra='forbid', so a misspelt one fails at load).  The KV-cache
class is handed in (tensorrt_llm.llmapi.KvCacheConfig in the image, the stand-in's in tests).
"""

from __future__ import annotations

from typing import Any, Callable

from contract.model_configs import KvCacheDtype, PyTorchEngineParameters


def kv_cache_kwargs(p: PyTorchEngineParameters) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"free_gpu_memory_fraction": p.kv_cache_free_gpu_mem_fraction,
                              "enable_block_reuse": p.enable_block_reuse}
    if p.kv_cache_dtype != KvCacheDtype.AUTO:  # 'auto' (the default) follows the checkpoint
        kwargs["dtype"] = p.kv_cache_dtype.value
    return kwargs


def llm_kwargs(p: PyTorchEngineParameters, kv_cache_config: Callable[..., Any]) -> dict[str, Any]:
    return {
        "model": str(p.model_dir),
        "backend": "pytorch",  # as NVIDIA's model.yaml says it (row triton.model_yaml)
        "skip_tokenizer_init": True,
        "dtype": p.dtype,  # preprocessing tokenizes; end_id is always explicit (row llm.end_id.setup)
        "tensor_parallel_size": p.tensor_parallel_size,
        "pipeline_parallel_size": p.pipeline_parallel_size,
        "max_batch_size": p.max_batch_size,
        "max_num_tokens": p.max_num_tokens,
        "max_seq_len": p.max_seq_len,
        "enable_chunked_prefill": p.enable_chunked_prefill,
        "enable_iter_perf_stats": True,  # KV-cache usage for llm_kv_cache_usage_ratio (row llm.get_stats_async)
        "kv_cache_config": kv_cache_config(**kv_cache_kwargs(p)),
    }
