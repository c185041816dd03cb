"""The stand-in `tensorrt_llm` (standins/llmapi) follows the LLM-API table: signatures, SamplingParams
fields, defaults and texts, LlmArgs/KvCacheConfig keywords - checked without starting its CPU
engine.  The 1.3.0rc29 table declares the same surface, so the engine model calls both alike."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from contract.upstream.llmapi import llmapi


@pytest.mark.parametrize("name", ["LLM.__init__", "LLM.generate_async", "LLM.get_stats_async"])
def test_signatures_are_the_tables(trtllm, name):
    from tensorrt_llm._upstream import API, signature_problems

    method = getattr(trtllm.LLM, name.split(".")[1])
    assert signature_problems(method, API.signature(name)) == []
    assert signature_problems(method, llmapi("1.3.0rc29").signature(name)) == []


def test_a_keyword_the_signature_lacks_fails_as_python_does(trtllm):
    with pytest.raises(TypeError, match="unexpected keyword argument 'priority'"):
        inspect.signature(trtllm.LLM.generate_async).bind(None, [1], priority=1)


def test_sampling_params_fields_and_defaults_are_the_tables(trtllm):
    fields = llmapi("1.2.1").sampling_fields
    params = trtllm.SamplingParams()
    assert list(vars(params)) == list(fields)
    assert params.max_tokens == 32 and params.n == 1 and params.best_of == 1 and params.is_greedy
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        trtllm.SamplingParams(top_n=3)


@pytest.mark.parametrize("kwargs,message", [
    (dict(top_p=1.5), "require 0 <= top_p <= 1, got top_p=1.5"),
    (dict(top_k=-1), "require top_k >= 0, got top_k=-1"),
    (dict(temperature=-0.5), "require temperature >= 0, got temperature=-0.5"),
    (dict(n=2, best_of=1), "best_of (1) cannot be less than n (2)"),
    (dict(best_of=2), "Greedy decoding in the LLM API does not allow multiple returns"),
])
def test_sampling_params_refuse_in_upstreams_words(trtllm, kwargs, message):
    with pytest.raises(ValueError) as e:
        trtllm.SamplingParams(**kwargs)
    assert message in str(e.value)


@pytest.mark.parametrize("kwargs,greedy", [
    (dict(), True), (dict(top_k=1, temperature=0.8), True), (dict(top_p=0.0, top_k=50), True),
    (dict(temperature=0), True), (dict(temperature=0.8), False), (dict(top_p=0.9), False),
])
def test_the_greedy_rule(trtllm, kwargs, greedy):
    assert trtllm.SamplingParams(**kwargs).is_greedy is greedy


def test_llm_args_and_kv_cache_config_forbid_extra_keywords(trtllm, tmp_path):
    from tensorrt_llm._upstream import ValidationError

    with pytest.raises(ValidationError, match="max_tokens_in_paged_kv_cache: Extra inputs are not permitted"):
        trtllm.LLM(str(tmp_path), max_tokens_in_paged_kv_cache=4)
    with pytest.raises(ValidationError, match="kv_cache_config.fraction: Extra inputs"):
        trtllm.KvCacheConfig(fraction=0.5)
    with pytest.raises(ValueError, match="free_gpu_memory_fraction must be a float between 0 and 1"):
        trtllm.KvCacheConfig(free_gpu_memory_fraction=1.5)
    assert trtllm.KvCacheConfig().free_gpu_memory_fraction == 0.9


def test_the_engine_models_keywords_are_accepted(trtllm):
    from contract.model_configs import PyTorchEngineParameters
    from model_repository.engines.pytorch.llm_config import llm_kwargs
    from model_repository.engines.pytorch.sampling import sampling_kwargs
    from model_repository.engine_step.engine_inputs import EngineInputs
    from tensorrt_llm.llmapi.llm import _ARGS, _NAMED

    kwargs = llm_kwargs(PyTorchEngineParameters(engine_dir=Path("/e"), model_dir=Path("/m"), max_batch_size=2,
                                                max_num_tokens=64, max_seq_len=128, max_input_len=64),
                        trtllm.KvCacheConfig)
    assert set(kwargs) <= set(_ARGS) | _NAMED
    request = EngineInputs(input_ids=(1,), input_lengths=1, request_output_len=4, runtime_top_k=0, runtime_top_p=0.5,
                           temperature=0.5, stop_words_list=((3,),))
    params = trtllm.SamplingParams(**sampling_kwargs(request))
    assert not params.is_greedy and params.stop_token_ids == [3] and params.pad_id == 0
