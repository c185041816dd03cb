"""top_logprobs are served only under numerics whose alternatives describe the sampled tokens:
exact, or a fast choice the build measured to agree on its host (issue 49)."""

import dataclasses
from pathlib import Path

from build_engines.openvino.numerics import EXACT, Numerics, numerics_lines
from build_engines.openvino.options import OpenVinoOptions
from build_engines.repository import engine_features, top_logprobs_withheld
from build_engines.spec import BuildSpec
from contract.features import Feature, refusals
from contract.model_configs import PreprocessingParameters

DQ32 = Numerics("f32", "f32", 32)


def _record(fast: Numerics, agreement: dict | None) -> dict:
    record = {"fast": fast.to_dict(), "why": "measured", "rows": []}
    if agreement is not None:
        record["logprobs"] = {"numerics": fast.to_dict()} | agreement
    return record


def _spec(**options) -> BuildSpec:
    return BuildSpec(checkpoint=Path("/ckpt"), openvino=OpenVinoOptions(**options))


DISAGREES = {"positions": 128, "top1_mismatches": 6, "max_gap": 0.1677}
AGREES = {"positions": 128, "top1_mismatches": 0, "max_gap": 0.0002}


def test_a_fast_choice_that_disagrees_withholds_top_logprobs_and_the_refusal_says_why():
    spec, numerics = _spec(), _record(DQ32, DISAGREES)
    engine = engine_features(spec, numerics=numerics)
    assert Feature.TOP_LOG_PROBS not in engine.features
    # what preprocessing reads back from its config refuses the field, naming the reason and the way out
    params = PreprocessingParameters(
        tokenizer_dir=Path("/t"),
        max_input_len=8,
        max_seq_len=16,
        default_max_tokens=4,
        engine_label=engine.label,
        engine_features=engine.to_parameter(),
        engine_withheld=engine.withheld_parameter(),
    )
    [(name, reason)] = refusals({"top_logprobs": 2}, params.engine())
    assert name == "top_logprobs"
    assert "dynamic quantization 32" in reason and "disagree with the sampled tokens" in reason
    assert "at 6 of 128 positions" in reason and "--numerics exact" in reason
    assert refusals({"top_logprobs": 0}, params.engine()) == []


def test_a_fast_choice_measured_to_agree_serves_them():
    assert Feature.TOP_LOG_PROBS in engine_features(_spec(), numerics=_record(DQ32, AGREES)).features


def test_a_fast_choice_never_measured_for_agreement_withholds_them():
    assert "was not measured" in top_logprobs_withheld(_spec(), _record(DQ32, None))


def test_exact_serves_them_from_the_same_build():
    # a fast build chose DQ32 (disagreeing); rendered at exact, the same engine serves top_logprobs
    exact = _spec(numerics="exact")
    assert Feature.TOP_LOG_PROBS in engine_features(exact, numerics=_record(DQ32, DISAGREES)).features
    # and a fast build whose choice is exact itself needs no measurement
    assert top_logprobs_withheld(_spec(), _record(EXACT, None)) == ""


def test_a_deployment_without_top_logprobs_withholds_nothing_to_explain():
    off = _spec(top_logprobs=False)
    assert top_logprobs_withheld(off, _record(DQ32, DISAGREES)) == ""
    assert Feature.TOP_LOG_PROBS not in engine_features(off, numerics=_record(DQ32, DISAGREES)).features


def test_plan_and_inspect_say_whether_they_are_served():
    options = dataclasses.replace(OpenVinoOptions())
    lines = numerics_lines(options, True, _record(DQ32, DISAGREES), [])
    assert any(line.startswith("top_logprobs: refused under this setting") for line in lines)
    lines = numerics_lines(options, True, _record(DQ32, AGREES), [])
    assert any(line.startswith("top_logprobs: served under this setting") for line in lines)
