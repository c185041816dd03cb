"""The sampling-field table (contract/sampling_fields.py) is the one declaration of a sampling field:
its two typed views follow the rows, and what the other layers spell is derived from them."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from contract import params, sampling_fields
from contract.features import CPU_ENGINE, SAMPLING_INPUT_FEATURES
from contract.sampling_fields import FIELDS, OpenAiKind, SentSampling
from contract.tensor_spec import DType
from contract.tensors import ENGINE_CORE_INPUTS, ENSEMBLE_INPUTS, by_name

_PYTHON_TYPE = {DType.FP32: float, DType.INT32: int, DType.UINT64: int}


def test_the_sent_view_has_one_optional_attribute_per_row_in_the_rows_order():
    hints = typing.get_type_hints(SentSampling)
    assert [f.name for f in dataclasses.fields(SentSampling)] == [f.name for f in FIELDS]
    for f in FIELDS:
        assert hints[f.name] == _PYTHON_TYPE[f.dtype] | None, f.name
    assert all(x.default is None for x in dataclasses.fields(SentSampling))


def test_the_engine_inputs_have_one_attribute_per_row_under_its_engine_name_with_its_default():
    from model_repository.engine_step.engine_inputs import EngineInputs

    hints = typing.get_type_hints(EngineInputs)
    fields = {x.name: x for x in dataclasses.fields(EngineInputs)}
    for f in FIELDS:
        assert hints[f.engine_name] is _PYTHON_TYPE[f.dtype], f.name
        assert fields[f.engine_name].default == f.engine_default, f.name


def test_tensors_rules_and_refusals_come_from_the_rows():
    ensemble, engine = by_name(ENSEMBLE_INPUTS), by_name(ENGINE_CORE_INPUTS)
    for f in FIELDS:
        assert (ensemble[f.name].dtype, ensemble[f.name].extra) == (f.dtype, not f.nvidia)
        assert engine[f.engine_name].dtype == f.dtype
        rule = params.RULES[f.name]
        assert (rule.low, rule.high, rule.integer) == (f.range.low, f.range.high, f.range.integer)
        assert params.ENGINE_RULES[f.engine_name] == f.name
        if f.feature is not None:
            assert SAMPLING_INPUT_FEATURES[f.name].feature is f.feature
            assert (f.feature in CPU_ENGINE.features) == f.cpu_engine


def test_the_front_takes_every_row_with_openai_bounds():
    from openai_front.params import CHAT_PARAMETERS, HONOUR, VLLM_EXTENSIONS
    from openai_front.schemas import ChatCompletionRequest, CompletionRequest

    for f in FIELDS:
        table = CHAT_PARAMETERS if f.openai.kind == OpenAiKind.SDK else VLLM_EXTENSIONS
        policy = table[f.name] if f.openai.kind == OpenAiKind.SDK else VLLM_EXTENSIONS[f.name].policy
        assert policy.action == HONOUR, f.name
        for model in (ChatCompletionRequest, CompletionRequest):
            assert f.name in model.model_fields
        if f.openai.bounds.high is not None:
            with pytest.raises(ValueError, match=f.name):
                ChatCompletionRequest(
                    model="m", messages=[{"role": "user", "content": "x"}], **{f.name: f.openai.bounds.high + 1}
                )


def test_a_sent_field_reaches_the_client_tensors_and_the_engine_defaults():
    from client.request_builder import build_inputs
    from client.types import SamplingParams

    sent = {f.name: 1 if f.range.integer else 0.5 for f in FIELDS}
    names = {t.name() for t in build_inputs("hi", SamplingParams(**sent), stream=False)}
    assert set(sent) <= names
    assert sampling_fields.as_sent_defaults(SentSampling()) == {
        f.engine_name: f.engine_default for f in sampling_fields.PASSED_AS_SENT
    }
