"""The default CPU engine is built with fused projections (build_engines/openvino/fusion.py):
its build record says what was fused, and its logits are bit-equal to the same engine built with
--no-fuse-projections, through the continuous-batching pipeline the server runs (greedy tokens)
and the IR itself (logits, prompts of 1 to 300 tokens)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.slow


def test_the_build_record_says_what_was_fused(default_engine, unfused_engine):
    fused = json.loads((default_engine / "build.json").read_text())
    assert fused["spec"]["openvino"]["fuse_projections"] is True
    assert fused["fusion"]["groups"] == {"k_proj+q_proj+v_proj": 30, "gate_proj+up_proj": 30}
    assert (fused["fusion"]["matmuls_before"], fused["fusion"]["matmuls_after"]) == (212, 122)
    assert fused["fusion"]["rows"] == {"k_proj+q_proj+v_proj": [192, 576, 192], "gate_proj+up_proj": [1536, 1536]}
    plain = json.loads((unfused_engine / "build.json").read_text())
    assert plain["spec"]["openvino"]["fuse_projections"] is False and plain["fusion"] == {}


def _logits(engine_dir, length: int) -> np.ndarray:
    import openvino as ov

    compiled = ov.Core().compile_model(str(engine_dir / "openvino_model.xml"), "CPU",
                                       {"INFERENCE_PRECISION_HINT": "f32", "KV_CACHE_PRECISION": "u8"})
    request = compiled.create_infer_request()
    ids = np.random.default_rng(length).integers(100, 40000, length)
    request.infer({"input_ids": ids[None], "attention_mask": np.ones((1, length), np.int64),
                   "position_ids": np.arange(length, dtype=np.int64)[None], "beam_idx": np.zeros(1, np.int32)})
    return request.get_tensor("logits").data.copy()


@pytest.mark.parametrize("length", [1, 64, 300])
def test_fused_logits_are_bit_equal_to_the_unfused_engine(default_engine, unfused_engine, length):
    assert np.array_equal(_logits(default_engine, length), _logits(unfused_engine, length))


def test_greedy_answers_through_the_served_pipeline_are_the_same(default_engine, unfused_engine, tokenizer):
    """OpenVINO GenAI's continuous-batching pipeline with the served numerics (tests/integration/direct_engine.py)."""
    from contract.model_configs import OpenVinoEngineParameters
    from tests.integration.direct_engine import direct_pipeline, greedy

    prompts = ["Write a short story about a lighthouse keeper.", "def fibonacci(n):",
               "List five uses of baking soda.", "Explain how TCP congestion control works."]
    answers = []
    for engine in (default_engine, unfused_engine):
        pipe = direct_pipeline(engine, OpenVinoEngineParameters(engine, max_num_seqs=4, max_num_batched_tokens=256))
        answers.append([greedy(pipe, i, tokenizer.encode(p).ids, 96) for i, p in enumerate(prompts)])
    assert answers[0] == answers[1] and sum(map(len, answers[0])) > 200
