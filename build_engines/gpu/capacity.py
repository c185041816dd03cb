"""GPU memory arithmetic for `plan`: weights per GPU, KV-cache bytes per token, and how many
full-length sequences the KV cache holds at a given kv_cache_free_gpu_mem_fraction.

Estimates, not measurements: activations and the CUDA context are a named reserve, and
TensorRT-LLM allocates the KV cache in blocks of `tokens_per_block` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from build_engines.checkpoint import CheckpointInfo
from build_engines.spec import BuildSpec
from build_engines.trtllm.options import KvCacheDtype
from build_engines.trtllm.rules import kv_heads_per_gpu
from contract.kv_cache import TOKENS_PER_BLOCK

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


class CapacityError(ValueError):
    pass


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

    def lines(self, spec: BuildSpec) -> list[str]:
        t = spec.trtllm
        shared = (
            f" (half of {t.serving.kv_cache_free_gpu_mem_fraction:g}: the draft engine takes the other half)"
            if t.has_draft_engine
            else ""
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
            f"(less weights and ~{RUNTIME_RESERVE_GIB:g} GiB runtime reserve) = {self.kv_tokens:,} tokens",
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


def estimate(info: CheckpointInfo, spec: BuildSpec) -> Capacity:
    t = spec.trtllm
    weights = weight_bytes(info, spec.precision.value) / t.world_size / GIB
    free = t.gpu.memory_gib - weights - RUNTIME_RESERVE_GIB
    if free <= 0:
        raise CapacityError(
            f"the weights need ~{weights:.1f} GiB per GPU; a {t.gpu.name} has {t.gpu.memory_gib:g} GiB: "
            "raise 'tp_size'/'pp_size' or pick a smaller 'precision'"
        )
    pool = free * t.engine_kv_cache_fraction
    per_token = kv_bytes_per_token_per_gpu(info, spec)
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
