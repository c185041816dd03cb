"""The CPU engine's numeric precisions, chosen by the spec instead of inherited from the host.

OpenVINO's CPU plugin otherwise picks them itself: bf16 activations where the CPU computes
bf16 natively (avx512_bf16 / AMX), f32 elsewhere, and a u8 KV cache - so the same engine gave
different answers on different hosts.  The spec's values are passed to every place the engine
is compiled (the served ContinuousBatchingPipeline and the fidelity report) as OpenVINO
properties (model_repository/engines/openvino/openvino_backend.py: engine_properties), and recorded
in build.json.
"""

from __future__ import annotations

from contract.model_configs import ACTIVATION_PRECISIONS, KV_CACHE_PRECISIONS

# OpenVINO's u8 KV cache stores, per token and KV head, a float32 scale and zero point beside the
# head_dim bytes (CPU plugin paged attention, KEY/VALUE_CACHE_GROUP_SIZE 0 = one group per head).
_KV_ELEMENT_BYTES = {"u8": 1, "f16": 2, "bf16": 2, "f32": 4}
_U8_GROUP_OVERHEAD_BYTES = 8


def kv_bytes_per_element(kv_cache_precision: str, head_dim: int) -> float:
    """Bytes one cached key or value element takes, its share of the quantization scales included."""
    size = float(_KV_ELEMENT_BYTES[kv_cache_precision])
    if kv_cache_precision == "u8":
        size += _U8_GROUP_OVERHEAD_BYTES / head_dim
    return size


# The KV cache's precision when the spec names none: u8 (a quarter of f32's bytes), except with
# speculative decoding, whose contract is greedy answers equal to plain decoding's: then the
# activations' own precision, unquantized (OpenVINO's CPU plugin takes no other unquantized one:
# "expect kvcache type f32" with f32 activations).  u8 quantizes each token's keys and values, so
# the last-bit differences between a one-token step and a multi-token pass (drafts verified, a
# batch) move values across a quantization step: log probs then differ by up to 0.06, against
# 3e-5 with f32.  Measured on the default model (int8 weights, f32 activations, greedy, up to 128
# tokens, OpenVINO GenAI 2026.4.1, 2026-11-26): prompt lookup changed 3 of 17 answers alone and
# 4 of 17 batched with u8, none with f32; a draft model 2 of 8 with u8, none with f32; plain
# decoding batched rather than one at a time changed 6 of 16 with u8, none with f32.  f32 costs
# 4x the cache memory; speed even at one stream (8 alternating rounds, 0.83-1.09x of u8) and
# 0.84-1.00x at 16 streams (short, ~250- and ~1000-token prompts), so u8 stays the default.
DEFAULT_KV_CACHE_PRECISION = "u8"


def default_kv_cache_precision(speculative: bool, activation_precision: str) -> str:
    return activation_precision if speculative else DEFAULT_KV_CACHE_PRECISION


def precision_problems(activation_precision: str, kv_cache_precision: str) -> list[str]:
    problems = []
    if activation_precision not in ACTIVATION_PRECISIONS:
        problems.append(f"'activation_precision' must be one of {list(ACTIVATION_PRECISIONS)}, got {activation_precision!r}")
    if kv_cache_precision not in KV_CACHE_PRECISIONS:
        problems.append(f"'kv_cache_precision' must be one of {list(KV_CACHE_PRECISIONS)}, got {kv_cache_precision!r}")
    return problems
