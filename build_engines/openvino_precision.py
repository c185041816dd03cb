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


def precision_problems(activation_precision: str, kv_cache_precision: str) -> list[str]:
    problems = []
    if activation_precision not in ACTIVATION_PRECISIONS:
        problems.append(f"'activation_precision' must be one of {list(ACTIVATION_PRECISIONS)}, got {activation_precision!r}")
    if kv_cache_precision not in KV_CACHE_PRECISIONS:
        problems.append(f"'kv_cache_precision' must be one of {list(KV_CACHE_PRECISIONS)}, got {kv_cache_precision!r}")
    return problems
