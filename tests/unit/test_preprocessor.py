"""Preprocessing with the real default tokenizer and generation_config."""

import dataclasses
import json

import numpy as np
import pytest

from contract.features import CPU_ENGINE, TRTLLM_ENGINE, with_guided_decoding

from contract.model_configs import PreprocessingParameters
from contract.params import InvalidParameter
from model_repository.text.generate_request import ChatMessage, GenerateRequest
from model_repository.text.postprocess_params import PostprocessParams
from model_repository.text.preprocessor import Preprocessor, resolve_sampling


@pytest.fixture(scope="module")
def pre(default_checkpoint):
    return Preprocessor(PreprocessingParameters(tokenizer_dir=default_checkpoint, max_input_len=64, max_seq_len=100,
                                                default_max_tokens=20, engine_label=CPU_ENGINE.label))


def req(**kw):
    return GenerateRequest(**({"text": "Hello world", "messages": None} | kw))


def test_text_prompt(pre):
    engine = pre(req(max_tokens=10))
    assert list(engine.input_ids) == pre.tokenizer.encode("Hello world") and engine.input_lengths == len(engine.input_ids)
    assert engine.request_output_len == 10 and engine.end_id == 2 and engine.is_greedy
    post = PostprocessParams.from_json(engine.detokenize_params)
    assert post.max_tokens == 10 and post.end_ids == (2,) and post.num_input_tokens == engine.input_lengths


def test_chat_template_applies(pre):
    engine = pre(req(text=None, messages=(ChatMessage("user", "What is the capital of France?"),)))
    text = pre.tokenizer.decode(list(engine.input_ids))
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")


def test_default_max_tokens_and_limits(pre):
    assert pre(req()).request_output_len == 20
    with pytest.raises(InvalidParameter, match="at most 64 \\(max_input_len\\)"):
        pre(req(text="word " * 80))
    with pytest.raises(InvalidParameter, match="max_seq_len is 100") as e:
        pre(req(max_tokens=99))
    assert e.value.field == "max_tokens"


def test_stop_words_become_token_sequences_with_variants(pre):
    engine = pre(req(stop_words=("User:",)))
    rows = [list(r) for r in engine.stop_words_list]
    assert pre.tokenizer.encode("User:", add_special_tokens=False) in rows
    assert pre.tokenizer.encode(" User:", add_special_tokens=False) in rows
    assert PostprocessParams.from_json(engine.detokenize_params).stop_strings == ("User:",)


def test_extra_eos_ids_become_stop_words(default_checkpoint, tmp_path):
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "chat_template.jinja"):
        (tmp_path / name).write_bytes((default_checkpoint / name).read_bytes())
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    pre = Preprocessor(PreprocessingParameters(tokenizer_dir=tmp_path, max_input_len=64, max_seq_len=100, default_max_tokens=8))
    engine = pre(req())
    assert engine.end_id == 2 and (0,) in engine.stop_words_list  # Llama-3 style: all EOS ids stop
    assert PostprocessParams.from_json(engine.detokenize_params).end_ids == (2, 0)


@pytest.mark.parametrize("request_kw,greedy", [
    ({}, True),
    ({"temperature": 0.8}, True),  # NVIDIA's contract: temperature alone does not sample
    ({"temperature": 0.8, "top_p": 1.0}, False),
    ({"temperature": 0.0, "top_k": 50}, True),
    ({"top_k": 1, "temperature": 0.8, "top_p": 0.9}, True),
    ({"top_k": 40}, False),
    ({"top_p": 0.9}, False),
])
def test_sampling_follows_tensorrt_llm(request_kw, greedy):
    s = resolve_sampling(req(**request_kw))
    assert (s.top_k == 1) == greedy
    if not greedy:
        assert s.temperature > 0 and (s.top_k > 1 or 0 < s.top_p <= 1)


def test_seed_is_kept_or_drawn():
    assert resolve_sampling(req(top_p=1.0, seed=7)).seed == 7
    seeds = {resolve_sampling(req(top_p=1.0)).seed for _ in range(5)}
    assert len(seeds) > 1


def test_every_request_gets_its_own_stream_id(pre):
    a, b = pre(req()), pre(req())
    assert PostprocessParams.from_json(a.detokenize_params).stream_id != PostprocessParams.from_json(b.detokenize_params).stream_id
    assert dataclasses.replace(a, detokenize_params="") == dataclasses.replace(b, detokenize_params="")


@pytest.mark.parametrize("inputs,refused", [
    ({"beam_width": 1, "num_return_sequences": 1, "return_context_logits": False}, None),
    ({"beam_width": 2}, "beam_width"),
    ({"lora_task_id": 0}, "lora_task_id"),
    ({"guided_decoding_guide_type": "json"}, "guided_decoding_guide_type"),
    ({"guided_decoding_guide_type": ""}, None),
    ({"return_perf_metrics": True}, "return_perf_metrics"),
])
def test_inputs_the_engine_cannot_honour_are_refused_naming_it(pre, inputs, refused):
    request = req(feature_inputs=tuple((k, np.array([v])) for k, v in inputs.items()))
    if refused is None:
        pre(request)
        return
    with pytest.raises(InvalidParameter, match="the CPU engine") as e:
        pre(request)
    assert e.value.field == refused


def test_guides_the_engine_cannot_enforce_are_refused_before_it(default_checkpoint):
    """With guided decoding (TensorRT-LLM's xgrammar decoder): an unknown guide type, which the
    C++ backend would decode unguided (row input.guided_decoding_guide_type), a schema keyword
    its grammar would drop, and a guide that does not compile are refused, naming the input."""
    engine = with_guided_decoding(TRTLLM_ENGINE)
    guided = Preprocessor(PreprocessingParameters(tokenizer_dir=default_checkpoint, max_input_len=64, max_seq_len=100,
                                                  default_max_tokens=20, engine_label=engine.label,
                                                  engine_features=engine.to_parameter()))

    def request(kind: str, guide: str):
        return req(feature_inputs=(("guided_decoding_guide_type", np.array([kind.encode()], dtype=object)),
                                   ("guided_decoding_guide", np.array([guide.encode()], dtype=object))))

    assert guided(request("regex", "[a-z]+")).input_ids
    for kind, guide, field, message in (
            ("yaml", "a: 1", "guided_decoding_guide_type", "allowed: \\['json', 'json_schema', 'regex', 'ebnf_grammar'\\]"),
            ("json_schema", '{"type": "array", "uniqueItems": true}', "guided_decoding_guide", "uniqueItems"),
            ("regex", "([a-", "guided_decoding_guide", "does not compile")):
        with pytest.raises(InvalidParameter, match=message) as e:
            guided(request(kind, guide))
        assert e.value.field == field
