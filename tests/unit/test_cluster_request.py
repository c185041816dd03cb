"""The Dynamo worker's request mapping (cluster/dynamo_request.py): a request as Dynamo 1.6.1's
frontend sends it (captured from `python -m dynamo.frontend` serving the default model's chat
template, tests/unit/data/dynamo_request.json) -> the engine contract's inputs, and every Dynamo
field the engines do not honour refused naming it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from cluster.dynamo_request import engine_arrays, engine_request
from cluster.replica_model import ReplicaModel
from contract.features import CPU_ENGINE, PYTORCH_ENGINE, TRTLLM_ENGINE, EngineFeatures, with_top_logprobs
from contract.params import InvalidParameter
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.engines.relay.relay import forwarded
from model_repository.text.generation_defaults import GenerationDefaults

DATA = Path(__file__).parent / "data"
CAPTURED = json.loads((DATA / "dynamo_request.json").read_text())


def replica(engine: EngineFeatures = with_top_logprobs(CPU_ENGINE)) -> ReplicaModel:
    return ReplicaModel(engine_model="openvino_llm", kv_block_tokens=32, checkpoint_dir=Path("/ckpt"), served_name="m",
                        max_input_len=1536, max_seq_len=2048, default_max_tokens=256, engine=engine,
                        defaults=GenerationDefaults(eos_ids=(2,), pad_id=2, bos_id=1, vocab_size=49152))


def request(**sections) -> dict:
    out = copy.deepcopy(CAPTURED)
    for name, values in sections.items():
        if isinstance(values, dict) and isinstance(out.get(name), dict):
            out[name].update(values)
        else:
            out[name] = values
    return out


def test_the_captured_greedy_chat_request_maps_onto_the_engine_contract():
    mapped = engine_request(CAPTURED, replica())
    inputs = mapped.inputs
    assert inputs.input_ids == tuple(CAPTURED["token_ids"]) and inputs.input_lengths == len(CAPTURED["token_ids"])
    assert inputs.request_output_len == 3 and inputs.end_id == 2 and inputs.pad_id == 2
    assert inputs.is_greedy and inputs.streaming and inputs.exclude_input_in_output
    assert inputs.return_log_probs and inputs.options.top_logprobs == 2  # logprobs + top_logprobs 2
    assert mapped.end_ids == frozenset({2}) and mapped.prompt_tokens == len(CAPTURED["token_ids"])
    # the arrays a replica's engine model takes, parsed back by the engine model's own parser
    arrays = engine_arrays(mapped)
    assert EngineInputs.from_arrays({k: v for k, v in arrays.items() if k in EngineInputs.__dataclass_fields__}) \
        == EngineInputs(**{**inputs.__dict__, "options": EngineInputs.__dataclass_fields__["options"].default})
    assert arrays["top_logprobs"].dtype == np.int32 and arrays["top_logprobs"].tolist() == [[2]]


def test_no_max_tokens_takes_the_repository_default_within_the_sequence_limit():
    assert engine_request(request(stop_conditions={"max_tokens": None}), replica()).max_tokens == 256
    long_prompt = request(token_ids=[5] * 1900, stop_conditions={"max_tokens": None})
    assert engine_request(long_prompt, replica()).max_tokens == 148  # 2048 - 1900


def test_a_temperature_samples_as_openai_means_it():
    """OpenAI's temperature alone samples; NVIDIA's contract needs top_p or top_k (params.implied_top_p)."""
    sampled = engine_request(request(sampling_options={"temperature": 0.7, "seed": 11}), replica()).inputs
    assert (sampled.runtime_top_k, sampled.runtime_top_p, sampled.temperature, sampled.seed) == (0, 1.0, 0.7, 11)
    assert not sampled.is_greedy
    absent = engine_request(request(sampling_options={"temperature": None}), replica()).inputs
    assert absent.is_greedy  # as our own front: no temperature is greedy
    no_top_k = engine_request(request(sampling_options={"temperature": 0.5, "top_k": -1}), replica()).inputs
    assert no_top_k.runtime_top_k == 0 and no_top_k.runtime_top_p == 1.0


def test_stop_token_ids_and_every_eos_stop_the_engine():
    mapped = engine_request(request(eos_token_ids=[2, 7], stop_conditions={"stop_token_ids_hidden": [2, 9],
                                                                           "stop_token_ids_visible": [11]}), replica())
    assert mapped.inputs.end_id == 2
    assert mapped.inputs.stop_words_list == ((7,), (9,), (11,))
    assert mapped.end_ids == frozenset({2, 7, 9, 11})


def test_ignore_eos_generates_max_tokens():
    mapped = engine_request(request(stop_conditions={"max_tokens": 40, "ignore_eos": True}), replica())
    assert mapped.inputs.min_tokens == 40


def test_n_guided_decoding_and_priority_reach_the_engine_options():
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    mapped = engine_request(request(sampling_options={"n": 3, "temperature": 1.0, "guided_decoding": {"json": schema}},
                                    priority=0.9), replica())
    options = mapped.inputs.options
    assert options.num_return_sequences == 3 and mapped.sequences == 3
    assert options.guided_decoding_guide_type == "json_schema" and json.loads(options.guided_decoding_guide) == schema
    assert options.priority == pytest.approx(0.9)
    arrays = engine_arrays(mapped)
    assert arrays["guided_decoding_guide_type"].tolist() == [[b"json_schema"]]
    assert arrays["priority"].dtype == np.float32


@pytest.mark.parametrize("sections, field", [
    ({"sampling_options": {"use_beam_search": True}}, "use_beam_search"),
    ({"sampling_options": {"best_of": 4}}, "best_of"),
    ({"sampling_options": {"length_penalty": 0.5}}, "length_penalty"),
    ({"output_options": {"prompt_logprobs": 1}}, "prompt_logprobs"),
    ({"stop_conditions": {"max_thinking_tokens": 8}}, "max_thinking_tokens"),
    ({"sampling_options": {"guided_decoding": {"choice": ["yes", "no"]}}}, "guided_decoding"),
    ({"sampling_options": {"guided_decoding": {"json": {}, "regex": "a"}}}, "guided_decoding"),
    ({"sampling_options": {"n": 0}}, "n"),
    ({"output_options": {"logprobs": 21}}, "logprobs"),
    ({"token_ids": []}, "token_ids"),
    ({"token_ids": ["a"]}, "token_ids"),
    ({"stop_conditions": "no"}, "stop_conditions"),
    ({"priority": 2.0}, "priority"),
])
def test_what_no_engine_honours_is_refused_naming_the_field(sections, field):
    with pytest.raises(InvalidParameter) as e:
        engine_request(request(**sections), replica())
    assert e.value.field == field


def test_neutral_values_clients_send_are_accepted():
    neutral = request(sampling_options={"best_of": 1, "use_beam_search": False, "length_penalty": 1.0, "min_p": 0.0})
    assert engine_request(neutral, replica()).inputs.is_greedy


def test_features_an_engine_lacks_are_refused_as_preprocessing_refuses_them():
    """The worker takes preprocessing's place: top-k log probs on the C++ backend, penalties on
    TorchSampler at 1.2.1 (contract/features.py), refused naming the engine."""
    with pytest.raises(InvalidParameter, match="TensorRT-LLM") as e:
        engine_request(request(output_options={"logprobs": 2}), replica(TRTLLM_ENGINE))
    assert e.value.field == "top_logprobs"
    chosen_only = engine_request(request(output_options={"logprobs": 0}), replica(TRTLLM_ENGINE)).inputs
    assert chosen_only.return_log_probs and chosen_only.options.top_logprobs == 0
    with pytest.raises(InvalidParameter) as e:
        engine_request(request(sampling_options={"presence_penalty": 0.5}), replica(PYTORCH_ENGINE))
    assert e.value.field == "presence_penalty"
    for engine in (PYTORCH_ENGINE, TRTLLM_ENGINE):  # min_p: the CPU engine's only (rows *.min_p)
        with pytest.raises(InvalidParameter, match="min-p") as e:
            engine_request(request(sampling_options={"min_p": 0.1}, output_options={"logprobs": None}), replica(engine))
        assert e.value.field == "min_p"
    assert engine_request(request(sampling_options={"min_p": 0.1, "temperature": 0.7}), replica()).inputs.min_p == (
        pytest.approx(0.1)
    )


def test_the_arrays_sent_to_the_cpp_backend_carry_none_of_our_own_inputs():
    """The relays' rule (relay.forwarded): neutral values of our inputs are not sent, so the C++
    model, which does not declare them, never sees one."""
    mapped = engine_request(request(output_options={"logprobs": None}), replica(TRTLLM_ENGINE))
    arrays = forwarded(engine_arrays(mapped))
    assert "top_logprobs" not in arrays and "priority" not in arrays and "detokenize_params" in arrays
    assert "min_p" not in arrays
