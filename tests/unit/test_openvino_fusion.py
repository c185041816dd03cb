"""Fused projections (build_engines/openvino/fusion.py) on a small OpenVINO model built here with
the weight subgraphs the exporter and int4 compression emit: the fused model's outputs are
bit-equal to the unfused one's on OpenVINO's CPU plugin, and matmuls whose weights differ in
structure are left alone."""

from __future__ import annotations

import numpy as np
import pytest

from build_engines.openvino.fusion import fuse_projections

ov = pytest.importorskip("openvino")
ops = pytest.importorskip("openvino.opset13")

K = 64


def _u8_weight(rng, rows: int):
    """NNCF's int8_asym: u8 -> f16, minus a u8 zero point, times an f16 scale per row -> f32."""
    w = ops.convert(ops.constant(rng.integers(0, 256, (rows, K)).astype(np.uint8)), ov.Type.f16)
    zp = ops.convert(ops.constant(rng.integers(100, 156, (rows, 1)).astype(np.uint8)), ov.Type.f16)
    scale = ops.constant((rng.random((rows, 1)) * 0.01).astype(np.float16))
    return ops.convert(ops.multiply(ops.subtract(w, zp), scale), ov.Type.f32)


def _u4_weight(rng, rows: int, group: int = 16):
    """build_engines/openvino/int4_float_zp.py: u4 groups with an f16 scale and zero point, reshaped to [rows, K]."""
    q = ops.constant(rng.integers(0, 16, (rows, K // group, group)).astype(np.uint8), dtype=ov.Type.u4)
    zp = ops.constant((rng.random((rows, K // group, 1)) * 15).astype(np.float16))
    scale = ops.constant((rng.random((rows, K // group, 1)) * 0.01).astype(np.float16))
    decompressed = ops.multiply(ops.subtract(ops.convert(q, ov.Type.f16), zp), scale)
    return ops.convert(ops.reshape(decompressed, ops.constant(np.asarray([rows, K], np.int64)), False), ov.Type.f32)


def _f16_weight(rng, rows: int):
    return ops.convert(ops.constant(rng.standard_normal((rows, K)).astype(np.float16)), ov.Type.f32)


def _linear(x, weight, module: str, layer: int):
    return ops.matmul(x, weight, False, True, name=f"__module.model.layers.{layer}.{module}/aten::linear/MatMul")


def _model():
    rng = np.random.default_rng(0)
    x = ops.parameter([-1, -1, K], np.float32, name="x")
    h1, h2, h3 = ops.relu(x), ops.sigmoid(x), ops.tanh(x)
    outputs = [_linear(h1, _u8_weight(rng, 32), "self_attn.q_proj", 0),   # u8, rows 32/16/8: fused
               _linear(h1, _u8_weight(rng, 16), "self_attn.k_proj", 0),
               _linear(h1, _u8_weight(rng, 8), "self_attn.v_proj", 0),
               _linear(h2, _u4_weight(rng, 48), "mlp.gate_proj", 0),      # u4 groups, rows 48/32: fused
               _linear(h2, _u4_weight(rng, 32), "mlp.up_proj", 0),
               _linear(h3, _u8_weight(rng, 24), "mlp.gate_proj", 1),      # u8 beside f16: left alone
               _linear(h3, _f16_weight(rng, 24), "mlp.up_proj", 1),
               _linear(x, _f16_weight(rng, 40), "mlp.down_proj", 0)]      # alone
    return ov.Model([ops.result(o) for o in outputs], [x], "tiny")


def _run(model, x):
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return [compiled(x)[out] for out in compiled.outputs]


def test_fused_outputs_are_bit_equal_and_mismatched_weights_stay_apart():
    x = np.random.default_rng(1).standard_normal((1, 5, K)).astype(np.float32)
    plain = _run(_model(), x)
    model = _model()
    record = fuse_projections(model)
    assert record.groups == {"k_proj+q_proj+v_proj": 1, "gate_proj+up_proj": 1}
    assert record.rows == {"k_proj+q_proj+v_proj": [16, 32, 8], "gate_proj+up_proj": [48, 32]}
    assert (record.matmuls_before, record.matmuls_after) == (8, 5)
    assert record.fused_modules == ("gate_proj", "k_proj", "q_proj", "up_proj", "v_proj")
    assert sum(op.get_type_name() == "MatMul" for op in model.get_ops()) == 5
    for before, after in zip(plain, _run(model, x)):
        assert after.shape == before.shape and np.array_equal(after, before)


def test_a_model_without_shared_inputs_is_left_as_it_was():
    rng = np.random.default_rng(2)
    x = ops.parameter([1, K], np.float32, name="x")
    model = ov.Model([ops.result(_linear(x, _u8_weight(rng, 8), "mlp.down_proj", 0))], [x], "one")
    record = fuse_projections(model)
    assert record.groups == {} and record.matmuls_after == record.matmuls_before == 1
