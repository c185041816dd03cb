"""Orchestrator mode places each TensorRT-LLM model on its GPUs: the rendered config.pbtxt of
tensorrt_llm and tensorrt_llm_draft carries gpu_device_ids (tensorrtllm_backend r25.12
docs/llama_multi_instance.md 221-229, 278-302); leader mode renders none."""

from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from build_engines.trtllm.launch import gpu_device_ids, serve_line
from build_engines.trtllm.options import DraftTargetOptions, GuidedDecodingBackend, SpeculativeDecoding, TrtLlmServing
from build_engines.trtllm.repository import trtllm_engine_models
from contract import names
from tests.unit.trtllm_fixtures import LLAMA_8B, llama_8b_checkpoint, trtllm_spec


def _rendered(tmp_path: Path, tp: int, draft: bool) -> dict[str, dict[str, str]]:
    """Each TensorRT-LLM model's parameters, as read back from its rendered config.pbtxt text."""
    ckpt = llama_8b_checkpoint(tmp_path / "target")
    options = {}
    if draft:
        small = llama_8b_checkpoint(tmp_path / "draft", {**LLAMA_8B, "num_hidden_layers": 2})
        options = {
            "speculative_decoding": SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL,
            "draft_target": DraftTargetOptions(str(small), 4),
        }
    spec = trtllm_spec(
        ckpt, tp_size=tp, serving=TrtLlmServing(guided_decoding_backend=GuidedDecodingBackend.NONE), **options
    )
    out = {}
    for model in trtllm_engine_models(tmp_path / "engine", spec, tmp_path / "tokenizer"):
        if model.config.backend == "tensorrtllm":
            text = text_format.MessageToString(model.config)  # what config.pbtxt holds
            parsed = text_format.Parse(text, mc.ModelConfig())
            out[parsed.name] = {k: v.string_value for k, v in parsed.parameters.items()}
    return out


def test_draft_and_target_on_tp2_are_both_placed_on_gpus_0_and_1(tmp_path):
    params = _rendered(tmp_path, tp=2, draft=True)
    assert set(params) == {names.TRTLLM_ENGINE, names.TRTLLM_DRAFT}
    assert params[names.TRTLLM_ENGINE]["gpu_device_ids"] == params[names.TRTLLM_DRAFT]["gpu_device_ids"] == "0,1"


@pytest.mark.parametrize("tp,draft", [(1, True), (2, False), (1, False)])
def test_leader_mode_renders_no_placement(tmp_path, tp, draft):
    """One model, or one GPU: leader mode (mpirun, one rank per GPU), where the backend reads none."""
    assert all("gpu_device_ids" not in p for p in _rendered(tmp_path, tp, draft).values())


def test_the_placement_follows_the_world_size_and_the_plan_says_it():
    assert gpu_device_ids(4, 2) == "0,1,2,3"
    assert gpu_device_ids(4, 1) == gpu_device_ids(1, 2) == ""
    assert "each model's config placing it with gpu_device_ids=0,1 (the draft on the target's GPUs)" in serve_line(2, 2)
    assert "gpu_device_ids" not in serve_line(2, 1) + serve_line(1, 2)
