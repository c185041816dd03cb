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


# What makes greedy answers depend on how a token was computed (alone or batched, from the prefix
# cache or a fresh prefill, in a speculative verify pass): each rounds values that differ in their
# last bits between those paths, so the difference grows to a whole rounding step.  Measured on the
# default model, 16 prompts batched vs one at a time, 128 greedy tokens, OpenVINO GenAI 2026.4.1,
# in-process, 2-core AMD EPYC Zen 4, 2026-11-26 (answers that changed; f32 throughout: 0 of 16):
_PATH_DEPENDENCE_MEASURED = {
    "kv_u8": "the u8 KV cache (6 of 16 answers changed batched vs alone)",
    "dynamic_quantization": "dynamic activation quantization (16 of 16 with group 32, f32 KV cache)",
    "activations_bf16": "bf16 activations (15 of 16, bf16 KV cache)",
}


def path_dependence(
    activation_precision: str, kv_cache_precision: str, dynamic_quantization_group_size: int
) -> list[str]:
    """Why greedy answers may change with the batch, the prefix cache or speculative decoding under
    these numerics; empty for the only exact ones measured (f32 activations and KV cache, no
    dynamic quantization)."""
    reasons = []
    if activation_precision == "bf16":
        reasons.append(_PATH_DEPENDENCE_MEASURED["activations_bf16"])
    elif activation_precision != "f32":
        reasons.append(f"{activation_precision} activations (not measured)")
    if kv_cache_precision == "u8":
        reasons.append(_PATH_DEPENDENCE_MEASURED["kv_u8"])
    elif kv_cache_precision != "f32" and kv_cache_precision != activation_precision:
        reasons.append(f"the {kv_cache_precision} KV cache (not measured; it rounds the keys and values)")
    if dynamic_quantization_group_size:
        reasons.append(_PATH_DEPENDENCE_MEASURED["dynamic_quantization"])
    return reasons


def exactness_line(activation_precision: str, kv_cache_precision: str, dynamic_quantization_group_size: int) -> str:
    reasons = path_dependence(activation_precision, kv_cache_precision, dynamic_quantization_group_size)
    if not reasons:
        return (
            "greedy answers: the same alone or batched, from the prefix cache or a fresh prefill, and with "
            "speculative decoding as without (measured)"
        )
    return (
        "greedy answers: may change with the batch, the prefix cache and speculative decoding, because of "
        + "; ".join(reasons)
    )


def precision_problems(activation_precision: str, kv_cache_precision: str) -> list[str]:
    problems = []
    if activation_precision not in ACTIVATION_PRECISIONS:
        problems.append(
            f"'activation_precision' must be one of {list(ACTIVATION_PRECISIONS)}, got {activation_precision!r}"
        )
    if kv_cache_precision not in KV_CACHE_PRECISIONS:
        problems.append(f"'kv_cache_precision' must be one of {list(KV_CACHE_PRECISIONS)}, got {kv_cache_precision!r}")
    return problems
