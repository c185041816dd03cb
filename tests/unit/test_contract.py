"""The tensor tables are the one source of truth: every typed object and config agrees."""

import dataclasses

from contract.features import INPUT_FEATURES

import numpy as np
import pytest

from contract import params
from contract.params import InvalidParameter
from contract.upstream import triton_models as tm
from contract.tensors import (
    BLS_INPUTS,
    ENGINE_CORE_INPUTS,
    ENGINE_INPUTS,
    ENGINE_OUTPUTS,
    ENSEMBLE_INPUTS,
    ENSEMBLE_OUTPUTS,
    POSTPROCESSING_INPUTS,
    POSTPROCESSING_OUTPUTS,
    PREPROCESSING_OUTPUTS,
    by_name,
)
from contract.tensors import ENGINE_PASSTHROUGH
from model_repository.engine_step.engine_inputs import EngineInputs, GenerationOptions, stack
from model_repository.text.generate_request import GenerateRequest


NVIDIA_TEMPLATED = {"${logits_datatype}": "TYPE_FP32", "${prompt_embedding_table_data_type}": "TYPE_FP16"}


def _nvidia(version, model, direction):
    decl = tm.load_models(version)[model]
    return {t.name: t for t in (decl.inputs if direction == "inputs" else decl.outputs)}


@pytest.mark.parametrize("version", tm.VERSIONS)
@pytest.mark.parametrize("model,ours", [("ensemble", (ENSEMBLE_INPUTS, ENSEMBLE_OUTPUTS)),
                                        ("tensorrt_llm_bls", (BLS_INPUTS, ENSEMBLE_OUTPUTS))])
def test_entry_models_declare_every_nvidia_tensor_as_nvidia_does(version, model, ours):
    """A superset of NVIDIA's contract: same names, dtypes, dims and wire shapes."""
    for direction, specs in zip(("inputs", "outputs"), ours):
        mine = by_name(specs)
        for name, decl in _nvidia(version, model, direction).items():
            assert name in mine, f"{model} {direction}: {name} is missing"
            spec = mine[name]
            assert not spec.extra, name
            assert spec.dtype.config_name == NVIDIA_TEMPLATED.get(decl.data_type, decl.data_type), name
            assert spec.dims == decl.dims, name
            assert spec.wire == decl.wire_shape, f"{name}: wire shape {spec.wire} != NVIDIA's {decl.wire_shape}"
            if direction == "inputs" and name not in ("text_input", "max_tokens"):  # ours are optional (a superset)
                assert spec.optional == decl.optional, name
        assert {t.name for t in specs if t.extra} <= OUR_EXTRAS


def test_engine_passthrough_inputs_keep_the_tensorrt_llm_declarations():
    for version in tm.VERSIONS:
        nvidia = _nvidia(version, "tensorrt_llm", "inputs")
        for spec in ENGINE_INPUTS:
            if spec.extra:
                continue
            decl = nvidia[spec.name]
            assert spec.dtype.config_name == NVIDIA_TEMPLATED.get(decl.data_type, decl.data_type), spec.name
            assert spec.dims == decl.dims, spec.name


OUR_EXTRAS = {"messages", "skip_special_tokens", "priority", "top_logprobs", "min_p", "stop", "finish_reason", "output_ids",
              "output_top_ids", "output_top_log_probs", "prompt_logprobs", "prompt_ids", "prompt_log_probs",
              "prompt_top_ids", "prompt_top_log_probs"}


def test_typed_objects_mirror_the_tables():
    assert [f.name for f in dataclasses.fields(EngineInputs)] == [t.name for t in ENGINE_CORE_INPUTS] + ["options"]
    # the pass-through inputs an engine of ours honours, under their engine names
    assert {f.name for f in dataclasses.fields(GenerationOptions)} <= set(ENGINE_PASSTHROUGH.values())
    assert [t.name for t in PREPROCESSING_OUTPUTS] == [t.name for t in ENGINE_CORE_INPUTS]
    request_fields = {f.name for f in dataclasses.fields(GenerateRequest)}
    inputs = {t.name for t in ENSEMBLE_INPUTS} - {"text_input", "return_num_input_tokens", "return_num_output_tokens"}
    assert inputs - set(INPUT_FEATURES) <= request_fields  # the feature inputs travel as feature_inputs
    assert {t.name for t in POSTPROCESSING_INPUTS} <= {t.name for t in ENGINE_OUTPUTS}
    assert {t.name for t in POSTPROCESSING_OUTPUTS} <= {t.name for t in ENSEMBLE_OUTPUTS}


def test_engine_inputs_round_trip_through_arrays():
    original = EngineInputs(input_ids=(1, 2, 3), input_lengths=3, request_output_len=7, end_id=2,
                            stop_words_list=((5, 6), (7,)), runtime_top_k=40, runtime_top_p=0.875, temperature=0.5,
                            seed=2**63 + 5, streaming=True, detokenize_params='{"a":"é"}')
    arrays = original.to_arrays()
    assert arrays["input_ids"].shape == (1, 3) and arrays["input_ids"].dtype == np.int32
    assert arrays["stop_words_list"].shape == (1, 2, 3)
    assert arrays["seed"].dtype == np.uint64
    assert EngineInputs.from_arrays(arrays) == original


def test_a_batch_of_prompts_stacks_and_splits_back():
    rows = [EngineInputs(input_ids=(1, 2, 3), input_lengths=3, request_output_len=4, stop_words_list=((5, 6),)),
            EngineInputs(input_ids=(9,), input_lengths=1, request_output_len=2, embedding_bias=(0.0, 1.5),
                         detokenize_params="b")]
    arrays = stack(rows)
    assert arrays["input_ids"].shape == (2, 3) and arrays["stop_words_list"].shape == (2, 2, 2)
    assert arrays["embedding_bias"].shape == (2, 2)
    back = EngineInputs.rows(arrays)
    assert back[0] == dataclasses.replace(rows[0], embedding_bias=(0.0, 0.0))  # padding: a zero bias
    assert back[1] == rows[1]
    with pytest.raises(ValueError, match="batch size 2"):
        EngineInputs.from_arrays(arrays)


def test_engine_inputs_reject_malformed_tensors():
    good = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=1).to_arrays()
    with pytest.raises(ValueError, match="'request_output_len': required"):
        EngineInputs.from_arrays({k: v for k, v in good.items() if k != "request_output_len"})
    with pytest.raises(ValueError, match="'temperature': expected one value"):
        EngineInputs.from_arrays(good | {"temperature": np.zeros((1, 2), np.float32)})
    with pytest.raises(ValueError, match="'input_lengths': batch size 1, other inputs have 2"):
        EngineInputs.rows(good | {"input_ids": np.zeros((2, 3), np.int32)})
    with pytest.raises(ValueError, match="'stop_words_list'"):
        EngineInputs.from_arrays(good | {"stop_words_list": np.array([[[1, 2], [3, -1]]], np.int32)})
    with pytest.raises(ValueError, match="not an input of the engine"):
        EngineInputs.from_arrays(good | {"beam_width": np.ones((1, 1), np.int32)})


@pytest.mark.parametrize("field,value,message", [
    ("max_tokens", 0, r"0 is outside the allowed range \[1, inf\)"),
    ("top_p", 1.5, r"1.5 is outside the allowed range \[0, 1\]"),
    ("top_p", -0.1, r"outside the allowed range \[0, 1\]"),
    ("temperature", -0.1, "outside"),
    ("temperature", float("nan"), "not a finite number"),
    ("repetition_penalty", 0.0, "outside"),
    ("top_k", 2.5, "not an integer"),
    ("seed", -1, "outside"),
])
def test_parameter_rules_name_the_field_and_the_range(field, value, message):
    with pytest.raises(InvalidParameter, match=message) as e:
        params.check(field, value)
    assert e.value.field == field
    assert f"'{field}'" in str(e.value)


def test_word_rules():
    params.check_words("stop_words", ["a", "b"])
    with pytest.raises(InvalidParameter, match="at most 64"):
        params.check_words("stop_words", ["x"] * 65)
    with pytest.raises(InvalidParameter, match="non-empty"):
        params.check_words("bad_words", [""])
