"""int4 with a float zero point per group (llama.cpp's Q4_1 / Q4_K idea), for OpenVINO IR.

NNCF's int4_asym stores each group's zero point as a 4-bit integer, so a group's minimum can
only sit on a multiple of its scale: every group is shifted by up to half a step.  Here each
group of `group` weights along the input dimension gets scale = (max - min) / 15 and a float16
zero point -min / scale, so the group's range is used exactly.  The weights stay u4 in the
same decompression subgraph NNCF emits (Convert -> Subtract zero point -> Multiply scale ->
Reshape -> MatMul), which OpenVINO's CPU plugin runs as a compressed fully-connected layer.

The default model is a Q4_1 GGUF dequantized (blocks of 32 along the input dimension, float
scale and minimum): with group 32 this reproduces its weights up to float16 rounding, which
is why llama.cpp's Q4_K (float minimum per 32-weight sub-block) measures so well on it.
Cost: 16 + 16 bits of scale and zero point per group (5 bits per weight at group 32, like Q4_1)
instead of NNCF's 16 + 4.
"""

from __future__ import annotations

import numpy as np

LEVELS = 15  # u4


def quantize_groups(weight: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[out, in] float -> (q u8 [out, in/group, group] in 0..15, scale f16, zero point f16 [out, in/group, 1])."""
    out_dim, in_dim = weight.shape
    w = weight.astype(np.float32).reshape(out_dim, in_dim // group, group)
    lo, hi = w.min(-1, keepdims=True), w.max(-1, keepdims=True)
    scale = ((hi - lo) / LEVELS).astype(np.float16)
    safe = np.where(scale == 0, np.float16(1), scale).astype(np.float32)
    zero_point = (-lo / safe).astype(np.float16)
    q = np.clip(np.rint(w / safe + zero_point.astype(np.float32)), 0, LEVELS).astype(np.uint8)
    return q, scale, zero_point


def dequantize_groups(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray) -> np.ndarray:
    """The weights the engine computes with, as float32 [out, in] (for tests and checks)."""
    w = (q.astype(np.float16) - zero_point) * scale
    return w.astype(np.float32).reshape(q.shape[0], -1)


def compress_matmuls(model, group: int, skip_output_dims: tuple[int, ...] = ()) -> int:
    """Replace every MatMul's float32 constant weight [out, in] (transpose_b) whose input dimension
    `group` divides by the u4 decompression subgraph.  Returns how many were replaced."""
    import openvino as ov
    import openvino.opset13 as ops

    replaced = 0
    for node in model.get_ordered_ops():
        if node.get_type_name() != "MatMul" or not node.get_attributes().get("transpose_b"):
            continue
        const = node.input_value(1).get_node()
        if const.get_type_name() != "Constant" or const.get_output_element_type(0) != ov.Type.f32:
            continue
        weight = const.get_data()
        if weight.ndim != 2 or weight.shape[1] % group or weight.shape[0] in skip_output_dims:
            continue
        q, scale, zero_point = quantize_groups(weight, group)
        name = const.get_friendly_name()
        q_const = ops.constant(q, dtype=ov.Type.u4, name=name)
        decompressed = ops.multiply(
            ops.subtract(ops.convert(q_const, ov.Type.f16), ops.constant(zero_point, name=f"{name}/zero_point")),
            ops.constant(scale, name=f"{name}/scale"),
        )
        reshaped = ops.reshape(decompressed, ops.constant(np.array(weight.shape, dtype=np.int64)), special_zero=False)
        node.input(1).replace_source_output(ops.convert(reshaped, ov.Type.f32).output(0))
        replaced += 1
    return replaced
