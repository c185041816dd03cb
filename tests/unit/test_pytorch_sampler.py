"""Issue 46 item 4: every sampling field honoured where the version can.  At TensorRT-LLM 1.2.1 the
PyTorch backend's default TorchSampler accepts and ignores the penalties, bad words and a seed;
its TRTLLMSampler (LLM(sampler_type='TRTLLMSampler')) applies them.  The plan picks the sampler by
the fields the deployment needs (--sampling-fields, --sampler), records it (build.json's spec,
the engine model's sampler_type parameter, LLM(sampler_type=...)), and only what the chosen
sampler does not apply is refused.  The stand-in reproduces both samplers."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from build_engines.pytorch.repository import pytorch_parameters
from build_engines.pytorch.sampler import SamplerChoice, plan_sampler
from build_engines.pytorch.spec import pytorch_options_from_dict
from build_engines.repository import engine_features
from build_engines.spec_base import SpecError
from contract.sampling_fields import SamplingFeature
from contract.features import Feature
from contract.model_configs import PreprocessingParameters
from contract.upstream.sampling_support import EnginePath, Support, sampling_support
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engines.pytorch import sampling
from model_repository.engines.pytorch.llm_config import llm_kwargs
from model_repository.text.generate_request import GenerateRequest
from model_repository.text.preprocessor import Preprocessor
from tests.unit.test_pytorch_build import spec_for
from tests.unit.trtllm_fixtures import llama_8b_checkpoint

PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")


@pytest.fixture
def llama(tmp_path) -> Path:
    return llama_8b_checkpoint(tmp_path / "llama")


def test_trtllm_sampler_rows_are_cited_and_apply_what_torch_sampler_ignores():
    table = sampling_support("1.2.1")
    assert table.default_sampler(EnginePath.PYTORCH) == "TorchSampler"
    for field in PENALTIES + ("seed", "bad_words"):
        assert table.row(EnginePath.PYTORCH, field).support == Support.IGNORED
        row = table.row(EnginePath.PYTORCH, field, "TRTLLMSampler")
        assert row.support == Support.HONOURED and row.citation.source.commit and row.citation.source.ref == "v1.2.1"
    limits = {x.id for x in table.sampler(EnginePath.PYTORCH, "TRTLLMSampler").limits}
    assert {"speculative", "top_logprobs", "deprecated"} <= limits


def test_auto_picks_the_sampler_that_applies_the_fields_and_says_what_it_costs():
    assert plan_sampler("1.2.1", SamplerChoice.AUTO, ()).sampler == "TorchSampler"
    chosen = plan_sampler("1.2.1", SamplerChoice.AUTO, ("repetition_penalty", "seed"))
    assert chosen.sampler == "TRTLLMSampler" and not chosen.problems
    assert "TorchSampler does not apply repetition_penalty, seed" in chosen.describe()
    assert any("speculative" in c for c in chosen.costs) and any("sampled token" in c for c in chosen.costs)


def test_what_no_sampler_can_do_and_what_the_chosen_one_does_not_is_refused_by_name():
    torch = plan_sampler("1.2.1", SamplerChoice.TORCH, ("frequency_penalty",))
    assert torch.problems and "'frequency_penalty'" in torch.problems[0] and "--sampler auto" in torch.problems[0]
    with_spec = plan_sampler("1.2.1", SamplerChoice.AUTO, ("seed",), speculative=True)
    assert with_spec.problems and "no sampler" in with_spec.problems[0] and "speculative" in with_spec.problems[0]
    spec_limit = plan_sampler("1.2.1", SamplerChoice.TRTLLM, (), speculative=True)
    assert spec_limit.problems and "speculative" in spec_limit.problems[0]
    # embedding_bias: TRTLLMSampler's row is not_read, so not applied: no sampler of 1.2.1 takes it for sure
    assert plan_sampler("1.2.1", SamplerChoice.TRTLLM, ("embedding_bias",)).problems


def test_a_deployment_built_for_penalties_records_and_renders_its_sampler(llama):
    spec = spec_for(llama, sampling_fields="repetition_penalty,presence_penalty")
    assert spec.pytorch.sampler == SamplerChoice.AUTO and spec.pytorch.sampler_plan.sampler == "TRTLLMSampler"
    # build.json holds the spec (asdict) and reads it back
    again = pytorch_options_from_dict(json.loads(json.dumps(dataclasses.asdict(spec.pytorch))))
    assert again.sampling_fields == ("repetition_penalty", "presence_penalty") and again.sampler == SamplerChoice.AUTO
    params = pytorch_parameters(llama.parent / "engine", spec, llama)
    assert params.sampler_type == "TRTLLMSampler"  # the engine model's config.pbtxt parameter
    assert llm_kwargs(params, lambda **kv: kv)["sampler_type"] == "TRTLLMSampler"  # LLM(sampler_type=...)
    features = engine_features(spec)
    assert {SamplingFeature.REPETITION_PENALTY, SamplingFeature.SEED, Feature.BAD_WORDS} <= features.features
    assert Feature.TOP_LOG_PROBS not in features.features and "TRTLLMSampler" in features.label
    assert spec_for(llama).pytorch.sampler_plan.sampler == "TorchSampler"  # nothing asked: upstream's default


def test_bad_sampler_options_fail_naming_the_field(llama):
    with pytest.raises(SpecError, match="'sampling_fields': unknown \\['top_n'\\]"):
        spec_for(llama, sampling_fields="top_n")
    with pytest.raises(SpecError, match="'sampling_fields' 'seed'"):
        spec_for(llama, sampler="torch", sampling_fields="seed").validate(None)


def test_preprocessing_and_the_engine_model_take_a_penalty_on_a_penalty_deployment(llama, default_checkpoint):
    """On main the 1.2.1 PyTorch deployment refused this request (INVALID_ARG, a 400 at the OpenAI front)."""
    features = engine_features(spec_for(llama, sampling_fields="repetition_penalty"))
    pre = Preprocessor(
        PreprocessingParameters(
            tokenizer_dir=default_checkpoint,
            max_input_len=64,
            max_seq_len=100,
            default_max_tokens=20,
            engine_label=features.label,
            engine_features=features.to_parameter(),
        )
    )
    out = pre(GenerateRequest(text="Hello world", messages=None, repetition_penalty=1.3))
    assert out.repetition_penalty == pytest.approx(1.3)
    request = EngineInputs(input_ids=(1, 2), input_lengths=2, request_output_len=4, repetition_penalty=1.3)
    assert sampling.problems(request, "1.2.1", "TRTLLMSampler") == []
    assert sampling.problems(request, "1.2.1", "TorchSampler")  # the default sampler still refuses it


# --- the stand-in: both samplers as upstream's source says --------------------------------------
def _generate(trtllm, model: Path, sampler: str, **params):
    async def go():
        llm = trtllm.LLM(
            str(model), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(), sampler_type=sampler
        )
        try:
            sp = trtllm.SamplingParams(**({"max_tokens": 12, "end_id": -1, "detokenize": False} | params))
            out = await llm.generate_async([1, 2, 3], sampling_params=sp).aresult()
            return out.outputs[0].token_ids
        finally:
            llm.shutdown()

    return asyncio.run(go())


@pytest.fixture
def toy(tmp_path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 8, "standin_toy_model": {}}))
    return tmp_path


def test_torch_sampler_ignores_penalties_bad_words_and_seeds_silently(trtllm, toy):
    plain = _generate(trtllm, toy, "auto", top_k=1)
    assert (
        _generate(
            trtllm, toy, "TorchSampler", top_k=1, repetition_penalty=3.0, presence_penalty=2.0, bad_token_ids=[plain[0]]
        )
        == plain
    )
    sampled = dict(temperature=1.0, top_k=8)
    assert _generate(trtllm, toy, "TorchSampler", seed=1, **sampled) == _generate(
        trtllm, toy, "auto", seed=2, **sampled
    )


def test_trtllm_sampler_applies_them(trtllm, toy):
    plain = _generate(trtllm, toy, "TRTLLMSampler", top_k=1)
    assert plain == _generate(trtllm, toy, "auto", top_k=1)  # greedy without penalties: the same tokens
    penalized = _generate(trtllm, toy, "TRTLLMSampler", top_k=1, repetition_penalty=3.0, presence_penalty=2.0)
    assert penalized != plain and len(set(penalized)) > len(set(plain))  # repeats are pushed down
    banned = _generate(trtllm, toy, "TRTLLMSampler", top_k=1, bad_token_ids=[plain[0]])
    assert plain[0] not in banned
    sampled = dict(temperature=1.0, top_k=8)
    assert _generate(trtllm, toy, "TRTLLMSampler", seed=1, **sampled) == _generate(
        trtllm, toy, "TRTLLMSampler", seed=1, **sampled
    )
    draws = {tuple(_generate(trtllm, toy, "TRTLLMSampler", seed=s, **sampled)) for s in range(4)}
    assert len(draws) > 1  # the request's seed decides


def test_trtllm_sampler_log_probs_are_the_sampled_tokens_only(trtllm, toy):
    async def go():
        llm = trtllm.LLM(
            str(toy), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(), sampler_type="TRTLLMSampler"
        )
        try:
            sp = trtllm.SamplingParams(max_tokens=4, end_id=-1, detokenize=False, temperature=1.0, top_k=8, logprobs=3)
            return (await llm.generate_async([1, 2], sampling_params=sp).aresult()).outputs[0]
        finally:
            llm.shutdown()

    out = asyncio.run(go())
    assert [list(d) for d in out.logprobs] == [[t] for t in out.token_ids]
    assert all(d[t].rank == 1 for d, t in zip(out.logprobs, out.token_ids))


def test_an_unknown_sampler_type_is_refused(trtllm, toy):
    with pytest.raises(ValueError, match="sampler_type"):
        trtllm.LLM(str(toy), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(), sampler_type="Fast")
