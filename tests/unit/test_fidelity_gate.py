"""The publication gate and the spec's precision and fidelity fields."""

import json
from pathlib import Path

import pytest

from build_engines.checkpoint import CheckpointInfo
from build_engines.fidelity.gate import FIDELITY_GATES, FidelityGateError, check_gate, gate_problems
from build_engines.fidelity.options import FidelityOptions
from build_engines.openvino.compress import Int4Recipe
from build_engines.spec import BuildSpec
from build_engines.openvino.options import OpenVinoOptions
from build_engines.spec_base import Precision, SpecError

SMOLLM2 = CheckpointInfo(path="/c", architecture="LlamaForCausalLM", num_layers=30, hidden_size=576,
                         intermediate_size=1536, num_heads=9, num_kv_heads=3, head_dim=64, vocab_size=49152,
                         max_position_embeddings=8192, dtype="float32", tie_word_embeddings=True)


def report(mean_kld=0.004, ppl_change=0.5, top1=96.0):
    return {"logits": {"mean_kld": mean_kld, "ppl_change_pct": ppl_change, "same_top1_pct": top1,
                       "engine_ppl": 10.0 * (1 + ppl_change / 100), "reference_ppl": 10.0, "scored_tokens": 1535},
            "text": {"name": "Python 3.11 stdlib pydoc_data/topics.py"}}


def test_an_engine_within_its_gate_passes():
    check_gate(report(), FIDELITY_GATES["int8"], "the int8 engine")


def test_the_gate_names_every_number_beyond_it():
    with pytest.raises(FidelityGateError) as e:
        check_gate(report(mean_kld=0.28, ppl_change=30.8, top1=73.3), FIDELITY_GATES["int4"], "the int4 engine")
    message = str(e.value)
    for number in ("0.2800 > 0.06", "+30.80%", "73.3% < 87%", "1535 tokens", "--gate-max-mean-kld", "--fidelity off"):
        assert number in message


def test_each_limit_alone():
    limits = FIDELITY_GATES["int8"]
    assert gate_problems(report()["logits"], limits) == []
    assert len(gate_problems(report(mean_kld=1.0)["logits"], limits)) == 1
    assert len(gate_problems(report(ppl_change=50)["logits"], limits)) == 1
    assert len(gate_problems(report(top1=10)["logits"], limits)) == 1
    assert gate_problems(report(ppl_change=-3.0)["logits"], limits) == []  # better than the reference is no failure


def test_overrides_replace_the_precision_defaults():
    limits = FidelityOptions(max_mean_kld=0.5).limits("int4")
    assert limits.max_mean_kld == 0.5 and limits.max_ppl_change_pct == FIDELITY_GATES["int4"].max_ppl_change_pct
    assert FidelityOptions().limits("fp8") is None  # no default gate: GPU precisions are compared, not gated here
    assert FidelityOptions(max_mean_kld=0.1).limits("fp8").max_mean_kld == 0.1


def test_gates_are_ordered_by_precision():
    kld = [FIDELITY_GATES[p].max_mean_kld for p in ("fp16", "int8", "int4")]
    assert kld == sorted(kld)


def test_precision_fields_round_trip_and_are_artifact_fields():
    spec = BuildSpec(Path("/c"), precision=Precision.INT4,
                     openvino=OpenVinoOptions(activation_precision="bf16", kv_cache_precision="f16",
                                              int4=Int4Recipe(group_size=64, ratio=0.8)),
                     fidelity=FidelityOptions(evaluation="full", max_mean_kld=0.2))
    assert BuildSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    numerics = spec.artifact_fields()["numerics"]
    assert numerics == {"activation_precision": "bf16", "kv_cache_precision": "f16", "dynamic_quantization_group_size": 0,
                        "int4": spec.to_dict()["openvino"]["int4"]}
    assert "fidelity" not in spec.artifact_fields()  # a new gate needs no rebuild
    int8 = BuildSpec(Path("/c"))
    assert "int4" not in int8.artifact_fields()["numerics"]  # the int4 recipe does not change an int8 engine


def test_records_without_precision_fields_still_read():
    data = BuildSpec(Path("/c")).to_dict()
    for key in ("activation_precision", "kv_cache_precision", "dynamic_quantization_group_size", "int4"):
        del data["openvino"][key]
    del data["fidelity"]
    assert BuildSpec.from_dict(data) == BuildSpec(Path("/c"))


@pytest.mark.parametrize("options,message", [
    (OpenVinoOptions(activation_precision="fp64"), "'activation_precision' must be one of"),
    (OpenVinoOptions(kv_cache_precision="u4"), "'kv_cache_precision' must be one of"),
    (OpenVinoOptions(int4=Int4Recipe(group_size=128)), "'int4.group_size' 128 must divide the model's dimensions \\[576, 1536\\] \\(e.g. \\[64, 32, 16\\]\\)"),
    (OpenVinoOptions(int4=Int4Recipe(ratio=0)), "'int4.ratio' must be in \\(0, 1\\]"),
    (OpenVinoOptions(int4=Int4Recipe(mode="int4_asym", awq=True, gptq=True)), "exclusive"),
    (OpenVinoOptions(int4=Int4Recipe(awq=True)), "int4_float_zp is data-free"),
])
def test_invalid_numerics_name_the_field(options, message):
    with pytest.raises(SpecError, match=message):
        BuildSpec(Path("/c"), precision=Precision.INT4, openvino=options).validate(SMOLLM2)


def test_an_int4_recipe_is_not_checked_for_an_int8_engine():
    BuildSpec(Path("/c"), openvino=OpenVinoOptions(int4=Int4Recipe(group_size=128))).validate(SMOLLM2)


def test_invalid_fidelity_options():
    with pytest.raises(SpecError, match="'fidelity.evaluation' must be one of"):
        BuildSpec(Path("/c"), fidelity=FidelityOptions(evaluation="huge")).validate(SMOLLM2)


def test_kv_sizing_uses_the_real_element_size():
    u8 = BuildSpec(Path("/c"), openvino=OpenVinoOptions(kv_cache_precision="u8"))
    f16 = BuildSpec(Path("/c"), openvino=OpenVinoOptions(kv_cache_precision="f16"))
    assert u8.kv_bytes_per_element(SMOLLM2) == pytest.approx(1 + 8 / 64)  # u8 + f32 scale and zero point per head
    assert f16.kv_bytes_per_element(SMOLLM2) == 2
    assert u8.kv_cache_bound_gb(SMOLLM2) == pytest.approx(f16.kv_cache_bound_gb(SMOLLM2) * 1.125 / 2)


def test_plan_shows_numerics_kv_element_size_and_gate(default_checkpoint):
    from build_engines.checkpoint import inspect_checkpoint
    from build_engines.plan_report import plan_lines

    info = inspect_checkpoint(default_checkpoint)
    text = "\n".join(plan_lines(BuildSpec(default_checkpoint, precision=Precision.INT4), info, Path("/e")))
    assert "numerics (fast): the fastest setting within the gate, measured by the build on this host among: f32 " \
        "activations, f32 KV cache, dynamic quantization off; f32 activations, f32 KV cache, dynamic quantization 32" in text
    assert "build_engines.fidelity.numerics_sweep" in text
    exact = BuildSpec(default_checkpoint, precision=Precision.INT4, openvino=OpenVinoOptions(numerics="exact"))
    text = "\n".join(plan_lines(exact, info, Path("/e")))
    assert "numerics (exact): f32 activations, f32 KV cache, dynamic quantization off (INFERENCE_PRECISION_HINT" in text
    assert "f32: 4 bytes/element" in text
    assert "build_engines.openvino.compress" in text and "group 32" in text
    assert f"gate: mean KLD <= {FIDELITY_GATES['int4'].max_mean_kld:g}" in text
    assert "1535 tokens of Python's pydoc_data/topics.py" in text


def test_engine_properties_pin_the_numerics():
    from contract.model_configs import OpenVinoEngineParameters
    from model_repository.engines.openvino.openvino_backend import engine_properties

    params = OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=1, max_num_batched_tokens=8,
                                      activation_precision="bf16", kv_cache_precision="f16", inference_threads=2)
    assert engine_properties(params) == {"INFERENCE_PRECISION_HINT": "bf16", "KV_CACHE_PRECISION": "f16",
                                         "DYNAMIC_QUANTIZATION_GROUP_SIZE": 0, "INFERENCE_NUM_THREADS": 2}
    with pytest.raises(ValueError, match="'kv_cache_precision' must be one of"):
        OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=1, max_num_batched_tokens=8,
                                 kv_cache_precision="i4").validate()


def test_calibration_never_uses_the_evaluation_text(default_checkpoint):
    from build_engines.fidelity.texts import EVAL_TEXT_MODULE, calibration_texts, evaluation_text
    from build_engines.openvino.compress import calibration_windows

    texts = calibration_texts()
    assert len(texts) >= 20 and all(t.path != evaluation_text().path for t in texts)
    assert all(EVAL_TEXT_MODULE not in str(t.path) for t in texts)
    windows = calibration_windows(default_checkpoint, samples=8, tokens=64)
    assert len(windows) == 8 and all(len(w) == 64 for w in windows)
    assert len({tuple(w) for w in windows}) == 8  # taken in turn from different texts


def test_float_zero_point_int4_reproduces_q4_1_blocks():
    """A Q4_1 block (scale d, float minimum m, codes 0..15 with both ends used) comes back to
    within float16 rounding; NNCF's integer zero point could not place m off the d grid."""
    import numpy as np

    from build_engines.openvino.int4_float_zp import dequantize_groups, quantize_groups

    rng = np.random.default_rng(0)
    d = rng.uniform(1e-3, 1e-2, (8, 4, 1)).astype(np.float16).astype(np.float32)
    m = rng.uniform(-0.05, 0.0, (8, 4, 1)).astype(np.float16).astype(np.float32)
    codes = rng.integers(0, 16, (8, 4, 32))
    codes[..., 0], codes[..., 1] = 0, 15
    weight = (d * codes + m).reshape(8, 128)
    q, scale, zero_point = quantize_groups(weight, 32)
    assert q.max() <= 15 and (q == codes).mean() > 0.99
    assert np.abs(dequantize_groups(q, scale, zero_point) - weight).max() < 0.1 * d.min()  # a tenth of a step


def test_float_zero_point_mode_is_data_free():
    assert Int4Recipe().mode == "int4_float_zp" and Int4Recipe().validate((576, 1536)) == []
    assert "data-free" in " ".join(Int4Recipe(scale_estimation=True).validate((576,)))
    assert Int4Recipe(mode="int4_asym", awq=True, scale_estimation=True, ratio=0.8).validate((576, 1536)) == []
