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


# The KV cache's precision when the spec names none: the activations' own, unquantized (f32 by
# default; OpenVINO's CPU plugin takes no other unquantized one: "expect kvcache type f32" with
# f32 activations), not OpenVINO's u8, because u8 makes greedy answers depend on how tokens were
# computed.  u8 quantizes each token's keys and values, so the last-bit differences between a
# one-token step and a multi-token pass (a batch, a prefill, a speculative verify pass) move
# values across a quantization step: log probs then differ by up to 0.06, against 3e-5 with f32.
# Measured on the default model (int8 weights, f32 activations, greedy, OpenVINO GenAI 2026.4.1,
# 2026-11-26, in-process), answers that changed with u8 / with f32:
#   plain decoding, 16 prompts batched vs one at a time (128 tokens):          6/16 / 0/16
#   prefix caching, 18 multi-turn answers, cached prefix vs fresh prefill (64): 1/18 / 0/18
#   prompt lookup vs plain, 17 prompts alone / batched (up to 128):             3, 4 of 17 / 0
#   draft model (10 of 30 layers) vs plain, 8 prompts (128):                    2/8 / 0/8
# f32 costs 4x the cache memory (plan sizes it; --kv-cache-precision u8 for big models and long
# contexts); speed even at one stream (8 alternating rounds, 0.83-1.09x of u8) and 0.84-1.00x at
# 16 streams (short, ~250- and ~1000-token prompts; ~0.93x typical).
def default_kv_cache_precision(activation_precision: str) -> str:
    return activation_precision


def precision_problems(activation_precision: str, kv_cache_precision: str) -> list[str]:
    problems = []
    if activation_precision not in ACTIVATION_PRECISIONS:
        problems.append(f"'activation_precision' must be one of {list(ACTIVATION_PRECISIONS)}, got {activation_precision!r}")
    if kv_cache_precision not in KV_CACHE_PRECISIONS:
        problems.append(f"'kv_cache_precision' must be one of {list(KV_CACHE_PRECISIONS)}, got {kv_cache_precision!r}")
    return problems
