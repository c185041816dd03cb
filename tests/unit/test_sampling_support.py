"""Issue 33 item 3: per TensorRT-LLM version, what each engine path does with each sampling field
we send (contract/upstream/data/sampling_support_<version>.json), and the deployment refusing,
by name and version, what its pinned version accepts and ignores."""

from __future__ import annotations

import numpy as np
import pytest

from contract import features, sampling_fields
from contract.sampling_fields import SamplingFeature
from contract.features import CPU_ENGINE, PYTORCH_ENGINE, TRTLLM_ENGINE, Feature
from contract.model_configs import PreprocessingParameters
from contract.params import InvalidParameter
from contract.upstream.sampling_support import (
    SAMPLING_FIELDS,
    EnginePath,
    Support,
    sampling_support,
    supported_versions,
)
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engines.pytorch import sampling
from model_repository.text.generate_request import GenerateRequest
from model_repository.text.preprocessor import Preprocessor

VERSIONS = ("1.1.0", "1.2.1")
IGNORED_AT_1_2_1 = ("repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "bad_words")


def test_a_table_for_every_version_an_image_pins():
    from contract.upstream.trtllm_build import supported_versions as pinned

    assert set(pinned()) <= set(supported_versions()) and set(VERSIONS) <= set(supported_versions())


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", list(EnginePath))
def test_every_sampling_field_has_a_cited_row(version, path):
    table = sampling_support(version)
    for field in SAMPLING_FIELDS:
        row = table.row(path, field)
        assert row.support in Support and row.rule and row.sampler
        assert row.citation.source.path and (row.citation.confirmed or row.citation.note), row
        if row.alternative is not None:  # another sampler of that version that honours it, and how it is picked
            assert row.alternative.sampler and row.alternative.selected_by and row.alternative.citation.source.path


@pytest.mark.parametrize("field", IGNORED_AT_1_2_1)
def test_torchsampler_at_1_2_1_accepts_and_ignores_penalties_bad_words_and_seed(field):
    row = sampling_support("1.2.1").row(EnginePath.PYTORCH, field)
    assert row.support == Support.IGNORED and row.sampler == "TorchSampler"
    assert row.alternative is not None and row.alternative.sampler == "TRTLLMSampler"
    assert "sampler_type" in row.alternative.selected_by
    assert any(pr in row.rule + row.citation.note for pr in ("16485", "16052", "17172"))


@pytest.mark.parametrize("version", VERSIONS)
def test_the_engine_flow_honours_every_field_of_nvidias_contract_and_none_of_ours(version):
    """NVIDIA's backend reads every sampling input its config declares; one of ours (min_p) it
    declares no input for, so its executor never gets it (rows engine.*)."""
    table = sampling_support(version)
    ours = {f.name for f in sampling_fields.FIELDS if not f.nvidia}
    assert ours == {"min_p"}
    assert all(table.row(EnginePath.ENGINE, f).support == Support.HONOURED for f in SAMPLING_FIELDS if f not in ours)
    assert all(table.row(EnginePath.ENGINE, f).support == Support.IGNORED for f in ours)


def test_no_engine_claims_a_field_its_version_ignores():
    """Every field a path ignores at a version maps to a Feature the deployment's EngineFeatures
    lacks, so preprocessing refuses it: never silently ignored."""
    from build_engines.pytorch.spec import pytorch_versions

    engines = [(EnginePath.PYTORCH, v, features.pytorch_engine(v)) for v in pytorch_versions()]
    engines += [(EnginePath.ENGINE, v, features.trtllm_engine(v)) for v in VERSIONS]
    for path, version, engine in engines:
        for row in sampling_support(version).ignored(path):
            assert row.field in features.SAMPLING_FIELD_FEATURES, f"{row.field} ignored at {version} has no Feature"
            assert features.SAMPLING_FIELD_FEATURES[row.field] not in engine.features, (path, version, row.field)
            assert version in engine.label


def test_the_served_constants_follow_the_table():
    assert Feature.BAD_WORDS not in PYTORCH_ENGINE.features and "1.2.1" in PYTORCH_ENGINE.label
    assert features.SAMPLING_FEATURES - {SamplingFeature.MIN_P} <= TRTLLM_ENGINE.features
    assert SamplingFeature.MIN_P not in TRTLLM_ENGINE.features | PYTORCH_ENGINE.features
    # OpenVINO GenAI takes penalties, rng_seed and min_p, and has no bad words (refused as before)
    assert CPU_ENGINE.features & features.SAMPLING_FEATURES == features.SAMPLING_FEATURES - {Feature.BAD_WORDS}


def test_the_pytorch_flow_versions_have_tables():
    from build_engines.pytorch.spec import pytorch_versions

    assert [features.PYTORCH_VERSION] == pytorch_versions()
    assert PYTORCH_ENGINE == features.pytorch_engine(features.PYTORCH_VERSION)


# --- the one place a field enters the server: preprocessing -------------------------------------
@pytest.fixture(scope="module")
def pytorch_pre(default_checkpoint):
    return Preprocessor(PreprocessingParameters(tokenizer_dir=default_checkpoint, max_input_len=64, max_seq_len=100,
                                                default_max_tokens=20, engine_label=PYTORCH_ENGINE.label,
                                                engine_features=PYTORCH_ENGINE.to_parameter()))


def req(**kw):
    return GenerateRequest(**({"text": "Hello world", "messages": None} | kw))


SAMPLED = dict(temperature=0.8, top_k=40)


@pytest.mark.parametrize("kw,field", [
    (dict(repetition_penalty=1.2), "repetition_penalty"),
    (dict(presence_penalty=0.5), "presence_penalty"),
    (dict(frequency_penalty=-0.3), "frequency_penalty"),
    (dict(seed=7, **SAMPLED), "seed"),
    (dict(min_p=0.1), "min_p"),
])
def test_preprocessing_refuses_an_ignored_field_naming_it_and_the_version(pytorch_pre, kw, field):
    with pytest.raises(InvalidParameter, match="1.2.1") as e:
        pytorch_pre(req(**kw))
    assert e.value.field == field and "TorchSampler" in str(e.value)


def test_preprocessing_refuses_bad_words_on_pytorch_1_2_1(pytorch_pre):
    bad = np.array([b"Paris"], dtype=object)
    with pytest.raises(InvalidParameter, match="1.2.1") as e:
        pytorch_pre(req(bad_words=("Paris",), feature_inputs=(("bad_words", bad),)))
    assert e.value.field == "bad_words"


@pytest.mark.parametrize("kw", [
    dict(repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, min_p=0.0),  # neutral: ask nothing
    dict(seed=7, temperature=0.0),  # greedy: a seed changes nothing
    dict(seed=7),  # neither top_k nor top_p: greedy as TensorRT-LLM decodes it
    dict(**SAMPLED),  # sampling without a seed: preprocessing draws one, as everywhere
])
def test_neutral_values_pass_on_pytorch_1_2_1(pytorch_pre, kw):
    pytorch_pre(req(**kw))


@pytest.mark.parametrize("engine", [CPU_ENGINE, TRTLLM_ENGINE])
def test_engines_that_honour_them_take_them(default_checkpoint, engine):
    pre = Preprocessor(PreprocessingParameters(tokenizer_dir=default_checkpoint, max_input_len=64, max_seq_len=100,
                                               default_max_tokens=20, engine_label=engine.label,
                                               engine_features=engine.to_parameter()))
    out = pre(req(repetition_penalty=1.2, presence_penalty=0.5, frequency_penalty=0.1, seed=7, **SAMPLED))
    assert (out.repetition_penalty, out.seed) == (pytest.approx(1.2), 7)


# --- the engine contract spoken directly to tensorrt_llm_pytorch ------------------------------------
def engine_request(**kw):
    return EngineInputs(input_ids=(1, 2), input_lengths=2, request_output_len=4, **kw)


@pytest.mark.parametrize("kw,name", [
    (dict(repetition_penalty=1.3), "repetition_penalty"),
    (dict(presence_penalty=0.4), "presence_penalty"),
    (dict(frequency_penalty=0.4), "frequency_penalty"),
    (dict(bad_words_list=((11,),)), "bad_words_list"),
    (dict(min_p=0.1), "min_p"),
])
def test_the_engine_model_refuses_them_too_at_its_version(kw, name):
    problems = sampling.problems(engine_request(**kw), "1.2.1")
    assert len(problems) == 1 and problems[0].startswith(f"'{name}'") and "1.2.1" in problems[0]
    assert sampling.problems(engine_request(), "1.2.1") == []
