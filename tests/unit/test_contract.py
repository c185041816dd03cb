"""The tensor tables are the one source of truth: every typed object and config agrees."""

import dataclasses

import numpy as np
import pytest

from contract import params
from contract.params import InvalidParameter
from contract.tensors import (
    DETOKENIZE_PARAMS,
    ENGINE_INPUTS,
    ENGINE_OUTPUTS,
    ENSEMBLE_INPUTS,
    ENSEMBLE_OUTPUTS,
    POSTPROCESSING_INPUTS,
    POSTPROCESSING_OUTPUTS,
    PREPROCESSING_OUTPUTS,
    by_name,
)
from model_repository.engine_inputs import EngineInputs
from model_repository.generate_request import GenerateRequest

# The names and dtypes NVIDIA's tensorrtllm_backend ensemble/tensorrt_llm configs use.
NVIDIA_ENSEMBLE = {
    "text_input": "TYPE_STRING", "max_tokens": "TYPE_INT32", "stream": "TYPE_BOOL", "stop_words": "TYPE_STRING",
    "bad_words": "TYPE_STRING", "exclude_input_in_output": "TYPE_BOOL", "end_id": "TYPE_INT32", "pad_id": "TYPE_INT32",
    "top_k": "TYPE_INT32", "top_p": "TYPE_FP32", "temperature": "TYPE_FP32", "repetition_penalty": "TYPE_FP32",
    "presence_penalty": "TYPE_FP32", "frequency_penalty": "TYPE_FP32", "min_tokens": "TYPE_INT32", "seed": "TYPE_UINT64",
    "return_log_probs": "TYPE_BOOL", "text_output": "TYPE_STRING", "cum_log_probs": "TYPE_FP32",
    "output_log_probs": "TYPE_FP32", "num_input_tokens": "TYPE_INT32", "num_output_tokens": "TYPE_INT32",
}
NVIDIA_ENGINE = {
    "input_ids": "TYPE_INT32", "input_lengths": "TYPE_INT32", "request_output_len": "TYPE_INT32", "end_id": "TYPE_INT32",
    "pad_id": "TYPE_INT32", "stop_words_list": "TYPE_INT32", "bad_words_list": "TYPE_INT32", "runtime_top_k": "TYPE_INT32",
    "runtime_top_p": "TYPE_FP32", "temperature": "TYPE_FP32", "repetition_penalty": "TYPE_FP32",
    "presence_penalty": "TYPE_FP32", "frequency_penalty": "TYPE_FP32", "min_tokens": "TYPE_INT32", "seed": "TYPE_UINT64",
    "return_log_probs": "TYPE_BOOL", "exclude_input_in_output": "TYPE_BOOL", "streaming": "TYPE_BOOL",
    "output_ids": "TYPE_INT32", "sequence_length": "TYPE_INT32", "cum_log_probs": "TYPE_FP32", "output_log_probs": "TYPE_FP32",
}


def test_ensemble_keeps_nvidia_names_and_dtypes():
    ours = by_name(ENSEMBLE_INPUTS) | by_name(ENSEMBLE_OUTPUTS)
    for name, dtype in NVIDIA_ENSEMBLE.items():
        assert ours[name].dtype.config_name == dtype, name
        assert not ours[name].extra
    assert {t.name for t in ours.values() if t.extra} == {"messages", "skip_special_tokens", "stop", "finish_reason", "output_ids"}


def test_engine_keeps_tensorrt_llm_names_and_dtypes():
    ours = by_name(ENGINE_INPUTS) | by_name(ENGINE_OUTPUTS)
    for name, dtype in NVIDIA_ENGINE.items():
        assert ours[name].dtype.config_name == dtype, name
    assert [t.name for t in ours.values() if t.extra] == [DETOKENIZE_PARAMS.name]


def test_typed_objects_mirror_the_tables():
    assert [f.name for f in dataclasses.fields(EngineInputs)] == [t.name for t in ENGINE_INPUTS]
    assert [t.name for t in PREPROCESSING_OUTPUTS] == [t.name for t in ENGINE_INPUTS]
    request_fields = {f.name for f in dataclasses.fields(GenerateRequest)}
    inputs = {t.name for t in ENSEMBLE_INPUTS} - {"text_input", "return_num_input_tokens", "return_num_output_tokens"}
    assert inputs - {"stop_words", "bad_words"} <= request_fields | {"text"}
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


def test_engine_inputs_reject_malformed_tensors():
    good = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=1).to_arrays()
    with pytest.raises(ValueError, match="'request_output_len': required"):
        EngineInputs.from_arrays({k: v for k, v in good.items() if k != "request_output_len"})
    with pytest.raises(ValueError, match="'temperature': expected one value"):
        EngineInputs.from_arrays(good | {"temperature": np.zeros((1, 2), np.float32)})
    with pytest.raises(ValueError, match="batch size 2"):
        EngineInputs.from_arrays(good | {"input_ids": np.zeros((2, 3), np.int32)})
    with pytest.raises(ValueError, match="'stop_words_list'"):
        EngineInputs.from_arrays(good | {"stop_words_list": np.array([[[1, 2], [3, -1]]], np.int32)})
    with pytest.raises(ValueError, match="not an input of the engine"):
        EngineInputs.from_arrays(good | {"beam_width": np.ones((1, 1), np.int32)})


@pytest.mark.parametrize("field,value,message", [
    ("max_tokens", 0, r"0 is outside the allowed range \[1, inf\)"),
    ("top_p", 1.5, r"1.5 is outside the allowed range \(0, 1\]"),
    ("top_p", 0.0, r"outside the allowed range \(0, 1\]"),
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
