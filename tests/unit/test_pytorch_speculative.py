"""Speculative decoding on the PyTorch backend: the LLM API's speculative_config, validated and
rendered (plan line, extra_llm_api_options mapping, the engine model's parameter, LLM keywords).
Nothing here ran on a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from build_engines.pytorch.plan import pytorch_plan_lines
from build_engines.pytorch.repository import pytorch_parameters
from build_engines.pytorch.speculative import (
    CONFIG_CLASS,
    DECODING_TYPE,
    SPEC_CITATIONS,
    PyTorchSpecMode,
    PyTorchSpeculative,
    speculative_from_dict,
)
from build_engines.pytorch.spec import pytorch_options_from_dict
from build_engines.spec_base import SpecError
from contract.model_configs import PyTorchEngineParameters
from model_repository.engines.pytorch.llm_config import SPECULATIVE_CLASSES, llm_kwargs
from tests.unit.test_pytorch_build import spec_for, validated
from tests.unit.trtllm_fixtures import LLAMA_8B, info_of, llama_8b_checkpoint


@pytest.fixture
def llama(tmp_path) -> Path:
    return llama_8b_checkpoint(tmp_path / "llama")


@pytest.fixture
def draft(tmp_path) -> Path:
    return llama_8b_checkpoint(tmp_path / "draft", dict(LLAMA_8B, num_hidden_layers=2))


def _factory(name, **fields):
    return {"class": name, **fields}


def test_ngram_renders_its_config(llama, tmp_path):
    spec = validated(llama, pt_speculative_decoding="ngram", max_draft_len=3, max_matching_ngram_size=4)
    assert spec.pytorch.speculative.llm_api_options() == {"speculative_config": {
        "decoding_type": "NGram", "max_draft_len": 3, "max_matching_ngram_size": 4, "is_keep_all": True,
        "is_use_oldest": True, "is_public_pool": True}}
    params = pytorch_parameters(tmp_path / "engine", spec)
    assert llm_kwargs(params, lambda **kv: kv, _factory)["speculative_config"] == {
        "class": "NGramDecodingConfig", "max_draft_len": 3, "max_matching_ngram_size": 4, "is_keep_all": True,
        "is_use_oldest": True, "is_public_pool": True}
    text = "\n".join(pytorch_plan_lines(spec, info_of(llama), tmp_path / "engine"))
    assert "speculative decoding: ngram (NGramDecodingConfig, max_draft_len 3, max_matching_ngram_size 4)" in text
    assert 'extra_llm_api_options (YAML flow mapping): {"speculative_config": {"decoding_type": "NGram"' in text


def test_draft_target_renders_the_draft_model(llama, draft, tmp_path):
    spec = validated(llama, pt_speculative_decoding="draft_target", max_draft_len=5, speculative_model_dir=draft)
    cfg = spec.pytorch.speculative.llm_api_options()["speculative_config"]
    assert cfg == {"decoding_type": "Draft_Target", "max_draft_len": 5, "speculative_model_dir": str(draft.resolve())}
    kwargs = llm_kwargs(pytorch_parameters(tmp_path / "engine", spec), lambda **kv: kv, _factory)
    assert kwargs["speculative_config"]["class"] == "DraftTargetDecodingConfig"


def test_eagle3_renders_its_heads(llama, draft, tmp_path):
    spec = validated(llama, pt_speculative_decoding="eagle3", max_draft_len=3, speculative_model_dir=draft)
    assert spec.pytorch.speculative.llm_api_options()["speculative_config"] == {
        "decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": str(draft.resolve()),
        "eagle3_one_model": True}


def test_no_speculation_renders_nothing(llama, tmp_path):
    spec = validated(llama)
    params = pytorch_parameters(tmp_path / "engine", spec)
    assert params.speculative_config == "{}" and "speculative_config" not in llm_kwargs(params, lambda **kv: kv, _factory)
    assert "speculative decoding: none" in "\n".join(pytorch_plan_lines(spec, info_of(llama), tmp_path / "engine"))


@pytest.mark.parametrize("options, message", [
    (dict(pt_speculative_decoding="ngram", max_draft_len=0), "'max_draft_len' must be in [1, 32]"),
    (dict(pt_speculative_decoding="ngram", max_draft_len=33), "'max_draft_len' must be in [1, 32]"),
    (dict(pt_speculative_decoding="ngram", max_matching_ngram_size=0), "'max_matching_ngram_size' must be >= 1"),
    (dict(pt_speculative_decoding="draft_target"), "'speculative_model_dir' is required for speculative_decoding "
                                                   "draft_target"),
    (dict(pt_speculative_decoding="eagle3"), "'speculative_model_dir' is required for speculative_decoding eagle3"),
    (dict(pt_speculative_decoding="eagle3", max_matching_ngram_size=5), "'max_matching_ngram_size' applies to "
                                                                        "speculative_decoding ngram only"),
])
def test_invalid_combinations_are_refused_naming_the_field(llama, options, message):
    with pytest.raises(SpecError, match=_re(message)):
        validated(llama, **options)


def test_a_model_dir_without_a_model_mode_is_refused(llama, draft):
    with pytest.raises(SpecError, match="'speculative_model_dir' needs 'speculative_decoding' draft_target or eagle3"):
        validated(llama, speculative_model_dir=draft)
    with pytest.raises(SpecError, match="ngram drafts from the prompt, it takes no model"):
        validated(llama, pt_speculative_decoding="ngram", speculative_model_dir=draft)


def test_a_draft_with_another_vocabulary_is_refused(llama, tmp_path):
    other = llama_8b_checkpoint(tmp_path / "other", dict(LLAMA_8B, vocab_size=32000))
    with pytest.raises(SpecError, match="vocab_size 32000 differs from the target's .*share the target's tokenizer"):
        validated(llama, pt_speculative_decoding="draft_target", speculative_model_dir=other)
    bare = tmp_path / "bare"
    bare.mkdir()
    with pytest.raises(SpecError, match="is not a Hugging Face checkpoint"):
        validated(llama, pt_speculative_decoding="eagle3", speculative_model_dir=bare)


def test_the_engine_flow_refuses_the_pytorch_options(llama):
    with pytest.raises(SpecError, match="'pt_speculative_decoding'.*configure --backend tensorrt_llm_pytorch"):
        from tests.unit.test_pytorch_build import DEFAULTS
        from build_engines.cli_options import make_spec
        make_spec(llama, backend="tensorrt_llm", precision="fp16", triton_image="26.07", detect=lambda: None, gpu="H100-SXM",
                  pt_speculative_decoding="ngram", **DEFAULTS)


def test_the_spec_round_trips_through_build_json(llama, draft):
    import dataclasses
    spec = validated(llama, pt_speculative_decoding="eagle3", speculative_model_dir=draft)
    data = json.loads(json.dumps(dataclasses.asdict(spec.pytorch), default=str))
    assert pytorch_options_from_dict(data).speculative == spec.pytorch.speculative
    assert speculative_from_dict(None) == PyTorchSpeculative()


def test_parameters_carry_the_config_as_json(llama, tmp_path):
    spec = validated(llama, pt_speculative_decoding="ngram")
    params = pytorch_parameters(tmp_path / "engine", spec)
    assert isinstance(params, PyTorchEngineParameters)
    assert json.loads(params.speculative_config)["decoding_type"] == "NGram"


def test_every_mode_has_a_class_and_citations():
    assert CONFIG_CLASS == SPECULATIVE_CLASSES
    assert set(DECODING_TYPE) == set(PyTorchSpecMode) - {PyTorchSpecMode.NONE}
    for fact, cite in SPEC_CITATIONS.items():
        assert cite.source.repo == "NVIDIA/TensorRT-LLM" and cite.source.ref == "v1.2.1"
        assert cite.confirmed is False and cite.note, fact  # none read at the tag


def _re(text: str) -> str:
    import re
    return re.escape(text)


def test_the_rendered_engine_model_carries_the_config(default_checkpoint, tmp_path):
    from build_engines.pytorch.build import build_pytorch_engine
    from build_engines.render import read_config
    from build_engines.repository import render_repository
    from contract import names
    from contract.model_parameters import from_parameters

    spec = validated(default_checkpoint, pt_speculative_decoding="ngram", max_draft_len=3)
    engine = tmp_path / "engine"
    build_pytorch_engine(spec, engine)
    render_repository(engine, tmp_path / "repository")
    config = read_config(tmp_path / "repository" / names.PYTORCH_ENGINE / "config.pbtxt")
    params = from_parameters(PyTorchEngineParameters, names.PYTORCH_ENGINE,
                             {k: v.string_value for k, v in config.parameters.items()})
    assert llm_kwargs(params, lambda **kv: kv, _factory)["speculative_config"] == {
        "class": "NGramDecodingConfig", "max_draft_len": 3, "max_matching_ngram_size": 2, "is_keep_all": True,
        "is_use_oldest": True, "is_public_pool": True}
