"""GPU memory arithmetic for `plan`: weights per GPU, KV-cache bytes per token, and how many
full-length sequences the KV cache holds at a given kv_cache_free_gpu_mem_fraction.

Estimates, not measurements: activations and the CUDA context are a named reserve, and
TensorRT-LLM allocates the KV cache in blocks of `tokens_per_block` tokens.

Each executor sizes its KV cache when it loads, from the memory free then (upstream
BaseKVCacheManager::calculateFreeMemBytes: cudaMemGetInfo's free bytes plus the memory pool's
free bytes, times kv_cache_free_gpu_mem_fraction; KV_CACHE_CITATION).  So with two executors on
one GPU (draft-target: tensorrt_llm and tensorrt_llm_draft) the second to load sees the first's
weights, reserve and KV pool already taken.  Triton loads a repository's models concurrently in
no order this kit fixes (MODEL_LOAD_CITATION), so each model is planned for the order that leaves
it least: loading second.  The PyTorch backend's draft-target is one executor instead: it loads
both models, then takes the fraction of what is free once and splits it by KV bytes per token of
target + draft (KvCacheCreator._cal_max_memory / _get_kv_size_per_token; PYTORCH_KV_CITATION).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from build_engines.checkpoint import CheckpointInfo
from build_engines.spec import BuildSpec
from build_engines.trtllm.options import KvCacheDtype
from build_engines.trtllm.rules import kv_heads_per_gpu
from contract.kv_cache import TOKENS_PER_BLOCK
from contract.upstream.citation import Citation, Source

GIB = 1024**3
# Bytes per weight of the quantized linear layers (int4 AWQ: 4 bits + one fp16 scale per
# block).  Embeddings, lm_head and norms stay 16-bit (quantize.py leaves lm_head alone
# unless --quantize_lm_head).
LINEAR_WEIGHT_BYTES = {
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8_sq": 1.0,
    "int8_wo": 1.0,
    "int4_awq": 0.5,
    "nvfp4": 0.5625,
}  # NVFP4: 4 bits + one FP8 scale per 16 weights
KV_ELEMENT_BYTES = {KvCacheDtype.AUTO: 2, KvCacheDtype.FP8: 1, KvCacheDtype.INT8: 1}
RUNTIME_RESERVE_GIB = 2.0  # CUDA context, TensorRT activations and runtime buffers per GPU (rough)
# The request shape a GPU plan sizes its batch for: 1,024 prompt + 1,024 generated tokens, the
# shape of NVIDIA's published 1000/1000 throughput figures (TensorRT-LLM perf-overview).
# trtllm-bench sizes for a dataset's average ISL/OSL (build_engines/gpu/limits.py); a plan has
# no dataset, so it names its design point.  Shorter requests fit more, longer fewer.
DESIGN_INPUT_LEN = 1024
DESIGN_OUTPUT_LEN = 1024


KV_CACHE_CITATION = Citation(
    Source("NVIDIA/TensorRT-LLM", "v1.1.0", "cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp", ""),
    "",
    False,
    "BaseKVCacheManager::calculateFreeMemBytes (freePrimaryMemBytes = (free + memoryPoolFree) x freeMemFraction, "
    "measured after cudaDeviceSynchronize) and calculateMaxNumBlocks (maxTokens = bytes / cacheSizeBytesPerToken, "
    "blocks = ceil(maxTokens / tokensPerBlock), the minimum over ranks); read through the code index in a copy "
    "whose commit the index does not name, not at a tag (the repository is over the fetch limit)",
)

MODEL_LOAD_CITATION = Citation(
    Source(
        "triton-inference-server/server",
        "r25.12",
        "docs/user_guide/model_management.md",
        "f6d01881f53a23541fec034e68a9e4b2a744e319",
    ),
    "161-165",
    True,
    "'Concurrently Loading Models': --model-load-thread-count defaults to 4 (the same at r26.07 819ee377, line 191)",
)
PYTORCH_KV_CITATION = Citation(
    Source("NVIDIA/TensorRT-LLM", "v1.2.1", "tensorrt_llm/_torch/pyexecutor/_util.py", ""),
    "",
    False,
    "KvCacheCreator: _get_kv_size_per_token adds the draft model's cache size per token to the target's, and "
    "_cal_max_memory takes (total - peak + allocated) x free_gpu_memory_fraction after both models are loaded and "
    "a profiling run; read through the code index in a copy whose commit the index does not name (it imports "
    "TorchSampler and TRTLLMSampler and MambaHybridCacheManager: the 1.1/1.2 era), not at a tag",
)


class CapacityError(ValueError):
    pass


@dataclass(frozen=True)
class Executor:
    """One TensorRT-LLM executor on a GPU: its engine's weights there and its KV fraction."""

    name: str
    weights_gib: float
    fraction: float


def pools_in_order(gpu_gib: float, order: Sequence[Executor]) -> dict[str, float]:
    """Each executor in turn takes its weights and runtime reserve, then `fraction` of what is
    free at that moment as its KV pool (GiB per GPU)."""
    free, pools = gpu_gib, dict[str, float]()
    for e in order:
        free -= e.weights_gib + RUNTIME_RESERVE_GIB
        if free <= 0:
            raise CapacityError(
                f"{e.name}'s weights (~{e.weights_gib:.1f} GiB per GPU) do not fit beside "
                + (", ".join(pools) or "nothing")
                + f" on {gpu_gib:g} GiB: raise 'tp_size'/'pp_size' or pick a smaller 'precision'"
            )
        pools[e.name] = free * e.fraction
        free -= pools[e.name]
    return pools


def shared_pools(gpu_gib: float, executors: Sequence[Executor]) -> dict[str, float]:
    """Each executor's KV pool in the load order that leaves it least (the order is not fixed)."""
    orders = [pools_in_order(gpu_gib, order) for order in itertools.permutations(executors)]
    return {e.name: min(pools[e.name] for pools in orders) for e in executors}


@dataclass(frozen=True)
class Capacity:
    weights_gib_per_gpu: float
    num_kv_heads: int  # the checkpoint's
    kv_heads_per_gpu: int
    kv_bytes_per_token_per_gpu: float
    kv_pool_gib_per_gpu: float
    kv_tokens: int  # tokens the KV pool holds (whole blocks)
    max_full_sequences: int  # sequences of max_seq_len tokens that fit at once
    concurrent_sequences: int  # min(that, max_batch_size): what the engine will run at once
    draft_weights_gib_per_gpu: float = 0.0  # draft-target: the draft engine's weights on the same GPUs
    draft_kv_pool_gib_per_gpu: float = 0.0  # and its KV pool, loading second

    def lines(self, spec: BuildSpec) -> list[str]:
        t = spec.trtllm
        shared = (
            f" of what is free when it loads, planned as loading second: after the draft engine's "
            f"~{self.draft_weights_gib_per_gpu:.2f} GiB weights, reserve and KV pool (the draft, planned the same "
            f"way, gets ~{self.draft_kv_pool_gib_per_gpu:.1f} GiB; Triton loads both at once, in no fixed order, "
            f"and each sizes its cache from the memory free then: {KV_CACHE_CITATION.source.path} "
            "calculateFreeMemBytes)"
            if t.has_draft_engine
            else (
                " of what is free after the target's and the draft model's "
                f"(~{self.draft_weights_gib_per_gpu:.2f} GiB) weights: one executor, one pool, "
                "each token's K and V of both models "
                f"({PYTORCH_KV_CITATION.source.path} KvCacheCreator)"
                if self.draft_weights_gib_per_gpu
                else ""
            )
        )
        copies = (
            f" (each KV head duplicated on {t.tp_size // self.num_kv_heads} GPUs)"
            if t.tp_size > self.num_kv_heads
            else ""
        )
        return [
            f"weights: ~{self.weights_gib_per_gpu:.2f} GiB per GPU ({spec.precision.value}, TP={t.tp_size} "
            f"PP={t.pp_size})",
            f"KV heads: {self.kv_heads_per_gpu} per GPU of {self.num_kv_heads}{copies}",
            f"KV cache: {self.kv_bytes_per_token_per_gpu / 1024:.1f} KiB per token per GPU "
            f"({t.kv_cache_dtype.value}); pool ~{self.kv_pool_gib_per_gpu:.1f} GiB per GPU at "
            f"kv_cache_free_gpu_mem_fraction={t.engine_kv_cache_fraction:g}{shared} of {t.gpu.memory_gib:g} GiB "
            f"(less weights and ~{RUNTIME_RESERVE_GIB:g} GiB runtime reserve per engine) = {self.kv_tokens:,} tokens",
            f"concurrency: {self.design_sequences:,} requests of {DESIGN_INPUT_LEN} + {DESIGN_OUTPUT_LEN} tokens fit "
            f"at once ({self.max_full_sequences:,} of the whole max_seq_len={spec.limits.max_seq_len}); "
            f"max_batch_size={spec.limits.max_batch_size} -> at most {self.concurrent_sequences} at once",
        ]

    @property
    def design_sequences(self) -> int:
        """Requests of the design point's length the KV pool holds at once."""
        return self.kv_tokens // (DESIGN_INPUT_LEN + DESIGN_OUTPUT_LEN)


def weight_bytes(info: CheckpointInfo, precision: str) -> float:
    h, q, kv = info.hidden_size, info.num_heads * info.head_dim, info.num_kv_heads * info.head_dim
    linear = info.num_layers * (h * q + 2 * h * kv + q * h + 3 * h * info.intermediate_size)
    return linear * LINEAR_WEIGHT_BYTES[precision] + (info.num_parameters - linear) * 2.0


def kv_bytes_per_token_per_gpu(info: CheckpointInfo, spec: BuildSpec) -> float:
    """K and V of this GPU's layers (layers / PP) and KV heads: KV heads / TP, or one duplicated
    head per GPU when TP is a multiple of them (rule kv_heads_duplicated_across_tensor_parallelism)."""
    t = spec.trtllm
    layers = math.ceil(info.num_layers / t.pp_size)
    kv_heads = kv_heads_per_gpu(info.num_kv_heads, t.tp_size)
    return 2 * layers * kv_heads * info.head_dim * KV_ELEMENT_BYTES[t.kv_cache_dtype]


def _draft_gib_per_gpu(spec: BuildSpec) -> float:
    """The draft engine's weights per GPU (built with the target's precision and TP x PP)."""
    from build_engines.checkpoint import CheckpointError
    from build_engines.trtllm.draft_target import read_draft

    try:
        draft = read_draft(spec.trtllm.draft_target)
    except CheckpointError as e:
        raise CapacityError(
            f"the draft engine's weights share the GPUs, and its checkpoint cannot be read: {e}"
        ) from None
    return weight_bytes(draft, spec.precision.value) / spec.trtllm.world_size / GIB


def pytorch_draft(spec: BuildSpec) -> CheckpointInfo | None:
    """The PyTorch backend's draft-target draft model (loaded in the target's executor), if any."""
    from build_engines.checkpoint import CheckpointError, inspect_checkpoint
    from build_engines.pytorch.speculative import PyTorchSpecMode

    s = spec.pytorch.speculative
    if s.mode != PyTorchSpecMode.DRAFT_TARGET:
        return None
    try:
        return inspect_checkpoint(Path(s.model_dir))
    except (CheckpointError, OSError) as e:
        raise CapacityError(
            f"the draft model shares the executor's memory, and {s.model_dir!r} cannot be read: {e}"
        ) from None


def kv_pools(
    info: CheckpointInfo, spec: BuildSpec, same_executor_draft: CheckpointInfo | None = None
) -> tuple[float, float, float, float]:
    """(target weights, target KV pool, draft weights, draft KV pool), GiB per GPU.  With a draft
    in the same executor (PyTorch) the one pool is the target's entry and the draft's is 0."""
    t = spec.trtllm
    weights = weight_bytes(info, spec.precision.value) / t.world_size / GIB
    if same_executor_draft is not None:  # loaded 16-bit, as its checkpoint is
        draft = weight_bytes(same_executor_draft, "bf16") / t.world_size / GIB
        free = t.gpu.memory_gib - weights - draft - RUNTIME_RESERVE_GIB
        if free <= 0:
            raise CapacityError(
                f"the target's (~{weights:.1f} GiB) and the draft's (~{draft:.1f} GiB) weights per GPU do not fit "
                f"on {t.gpu.memory_gib:g} GiB: raise 'tp_size'/'pp_size' or pick a smaller 'precision'"
            )
        return weights, free * t.engine_kv_cache_fraction, draft, 0.0
    if weights + RUNTIME_RESERVE_GIB >= t.gpu.memory_gib:
        raise CapacityError(
            f"the weights need ~{weights:.1f} GiB per GPU; a {t.gpu.name} has {t.gpu.memory_gib:g} GiB: "
            "raise 'tp_size'/'pp_size' or pick a smaller 'precision'"
        )
    if not t.has_draft_engine:
        return weights, (t.gpu.memory_gib - weights - RUNTIME_RESERVE_GIB) * t.engine_kv_cache_fraction, 0.0, 0.0
    draft = _draft_gib_per_gpu(spec)
    fraction = t.engine_kv_cache_fraction  # the fraction both configs render
    pools = shared_pools(t.gpu.memory_gib, (Executor("target", weights, fraction), Executor("draft", draft, fraction)))
    return weights, pools["target"], draft, pools["draft"]


def estimate(info: CheckpointInfo, spec: BuildSpec, same_executor_draft: CheckpointInfo | None = None) -> Capacity:
    """The KV pool and what it holds; `same_executor_draft`: the PyTorch backend's draft model,
    whose KV cache shares the pool token for token (pytorch_draft)."""
    t = spec.trtllm
    weights, pool, draft_weights, draft_pool = kv_pools(info, spec, same_executor_draft)
    per_token = kv_bytes_per_token_per_gpu(info, spec)
    if same_executor_draft is not None:
        per_token += kv_bytes_per_token_per_gpu(same_executor_draft, spec)
    blocks = int(pool * GIB // (per_token * TOKENS_PER_BLOCK))
    blocks_per_sequence = math.ceil(spec.limits.max_seq_len / TOKENS_PER_BLOCK)
    sequences = blocks // blocks_per_sequence
    design = blocks * TOKENS_PER_BLOCK // (DESIGN_INPUT_LEN + DESIGN_OUTPUT_LEN)
    return Capacity(
        weights,
        info.num_kv_heads,
        kv_heads_per_gpu(info.num_kv_heads, t.tp_size),
        per_token,
        pool,
        blocks * TOKENS_PER_BLOCK,
        sequences,
        min(max(sequences, design), spec.limits.max_batch_size),
        draft_weights,
        draft_pool,
    )


def pytorch_capacity_spec(spec: BuildSpec, effective: str, fp8_kv: bool) -> BuildSpec:
    """The engine flow's memory arithmetic applies to the PyTorch backend (same weights, same
    paged KV cache of 32-token blocks): its spec as an engine-flow spec."""
    from build_engines.spec_base import EngineBackend, Precision
    from build_engines.trtllm.options import TrtLlmOptions, TrtLlmServing

    p = spec.pytorch
    return replace(
        spec,
        backend=EngineBackend.TENSORRT_LLM,
        precision=Precision(effective),
        trtllm=TrtLlmOptions(
            trtllm_version=p.trtllm_version,
            triton_release=p.triton_release,
            tp_size=p.tp_size,
            pp_size=p.pp_size,
            gpu=p.gpu,
            kv_cache_dtype=KvCacheDtype.FP8 if fp8_kv else KvCacheDtype.AUTO,
            serving=TrtLlmServing(kv_cache_free_gpu_mem_fraction=p.serving.kv_cache_free_gpu_mem_fraction),
        ),
    )
