"""min_p (contract/sampling_fields.py, row min_p) end to end: what each engine does with it.

The CPU engine applies it (OpenVINO GenAI 2026.4.1: GenerationConfig.min_p, MinPFilter); the
PyTorch backend maps it onto SamplingParams.min_p, and TensorRT-LLM 1.2.1's samplers do not apply
it (TorchSampler ignores it, TRTLLMSampler's is not read: rows pytorch.*.min_p), nor does the C++
backend take it (row engine.min_p): refused there by name, never dropped."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from contract.features import CPU_ENGINE, PYTORCH_ENGINE, SAMPLING_INPUT_FEATURES, TRTLLM_ENGINE, refusals
from contract.upstream.llmapi import SUPPORTED_VERSIONS, llmapi
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engines.openvino.openvino_backend import generation_config
from model_repository.engines.pytorch import sampling
from model_repository.engines.relay import bls_pipeline, relay

SAMPLED = dict(runtime_top_k=40, temperature=0.7, seed=5)


def engine_request(**kw) -> EngineInputs:
    return EngineInputs(input_ids=(1, 2), input_lengths=2, request_output_len=4, **kw)


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_min_p_reaches_the_pytorch_backends_sampling_params(version):
    kwargs = sampling.sampling_kwargs(engine_request(min_p=0.1, **SAMPLED))
    assert kwargs["min_p"] == pytest.approx(0.1) and "min_p" in llmapi(version).sampling_fields
    assert sampling.sampling_kwargs(engine_request(**SAMPLED))["min_p"] is None  # 0: the runtime's default (off)
    assert "min_p" not in sampling.sampling_kwargs(engine_request(min_p=0.1))  # greedy: top_k 1, nothing to cut


def test_the_stand_ins_sampling_params_take_it(trtllm):
    params = trtllm.SamplingParams(**sampling.sampling_kwargs(engine_request(min_p=0.1, **SAMPLED)))
    assert params.min_p == pytest.approx(0.1) and not params.is_greedy


@pytest.mark.parametrize("sampler", ["TorchSampler", "TRTLLMSampler"])
def test_the_pytorch_engine_model_refuses_it_by_name_at_1_2_1(sampler):
    problems = sampling.problems(engine_request(min_p=0.1, **SAMPLED), "1.2.1", sampler)
    assert len(problems) == 1 and problems[0].startswith("'min_p'") and sampler in problems[0]
    assert sampling.problems(engine_request(min_p=0.0, **SAMPLED), "1.2.1", sampler) == []


@pytest.mark.parametrize("engine", [PYTORCH_ENGINE, TRTLLM_ENGINE])
def test_preprocessings_refusal_names_min_p_and_the_engine(engine):
    ((name, reason),) = refusals({"min_p": 0.1}, engine, SAMPLING_INPUT_FEATURES)
    assert name == "min_p" and "min-p sampling" in reason and engine.label in reason and "send 0" in reason
    assert refusals({"min_p": 0.0}, engine, SAMPLING_INPUT_FEATURES) == []


def test_the_cpu_engine_takes_it_onto_generation_config():
    assert refusals({"min_p": 0.1}, CPU_ENGINE, SAMPLING_INPUT_FEATURES) == []
    assert generation_config(engine_request(min_p=0.25, **SAMPLED)).min_p == pytest.approx(0.25)
    # OpenVINO GenAI refuses min_p 1 when sampling ([0, 1)); keeping only the most probable token is top-k 1
    one = generation_config(engine_request(min_p=1.0, **SAMPLED))
    assert (one.min_p, one.top_k, one.do_sample) == (0.0, 1, True)
    assert generation_config(engine_request(min_p=0.25)).do_sample is False  # greedy: min_p changes nothing


def _generate(trtllm, model: Path, sampler: str, **params):
    async def go():
        llm = trtllm.LLM(
            str(model), skip_tokenizer_init=True, kv_cache_config=trtllm.KvCacheConfig(), sampler_type=sampler
        )
        try:
            sp = trtllm.SamplingParams(**({"max_tokens": 8, "end_id": -1, "detokenize": False} | params))
            return (await llm.generate_async([1, 2, 3], sampling_params=sp).aresult()).outputs[0].token_ids
        finally:
            llm.shutdown()

    return asyncio.run(go())


def test_the_stand_in_ignores_it_on_torch_sampler_and_refuses_it_on_trtllm_sampler(trtllm, tmp_path):
    """As upstream at 1.2.1: TorchSampler never reads it (row pytorch.min_p); what TRTLLMSampler does
    with it was not read (row pytorch.trtllm_sampler.min_p), so the stand-in does not guess."""
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": 8, "standin_toy_model": {}}))
    sampled = dict(temperature=1.0, top_k=8, seed=1)
    assert _generate(trtllm, tmp_path, "TorchSampler", min_p=0.9, **sampled) == _generate(
        trtllm, tmp_path, "TorchSampler", **sampled
    )
    with pytest.raises(NotImplementedError, match="min_p"):
        _generate(trtllm, tmp_path, "TRTLLMSampler", min_p=0.9, **sampled)


def test_the_relays_forward_a_set_min_p_to_our_engines_and_never_a_neutral_one_to_the_cpp_model():
    """min_p is ours (not in NVIDIA's tensorrt_llm config): a relay or tensorrt_llm_bls sends it only when it
    asks for something, which preprocessing lets through only to an engine that applies it."""
    for value, sent in ((0.1, True), (0.0, False)):
        arrays = engine_request(min_p=value, **SAMPLED).to_arrays()
        assert ("min_p" in relay.forwarded(arrays)) is sent
        engine, _ = bls_pipeline.engine_request(arrays, {})
        assert ("min_p" in engine) is sent
