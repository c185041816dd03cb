"""The tensorrt_llm stand-in's pure logic against the cited backend-semantics table: settings
read as upstream reads them, request parsing and its errors, the request-id registry, and the
results upstream's executor creates.  No Triton, no OpenVINO."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contract.upstream.backend_semantics import SUPPORTED_VERSIONS, backend_semantics
from standins.trtllm import upstream
from standins.trtllm.registry import TritonIdRegistry
from standins.trtllm.request import convert_word_list, is_stop, parse_request
from standins.trtllm.results import RowState, response_arrays
from standins.trtllm.settings import EngineLimits, engine_limits, load_settings
from standins.trtllm.upstream import StandinLimitation, UpstreamError

SEM = backend_semantics(upstream.PINNED_VERSION)
ALL = frozenset({"output_ids", "sequence_length", "cum_log_probs", "output_log_probs"})
REQUIRED_KEYS = ("gpt_model_type", "tokenizer_dir", "guided_decoding_backend", "xgrammar_tokenizer_info_path")


def config(**params) -> dict:
    base = {"gpt_model_type": "inflight_fused_batching", "tokenizer_dir": "", "guided_decoding_backend": "",
            "xgrammar_tokenizer_info_path": "", "gpt_model_path": "/engine"}
    base.update(params)
    return {"parameters": {k: {"string_value": v} for k, v in base.items() if v is not None},
            "model_transaction_policy": {"decoupled": True},
            "dynamic_batching": {"default_queue_policy": {"max_queue_size": "8"}}}


def request(**arrays) -> dict[str, np.ndarray]:
    base = {"input_ids": np.array([[5, 6, 7]], np.int32), "input_lengths": np.array([3], np.int32),
            "request_output_len": np.array([4], np.int32)}
    base.update({k: np.asarray(v) for k, v in arrays.items()})
    return {k: v for k, v in base.items() if v.dtype != object}


def parse(arrays, decoupled=True, exclude=True):
    return parse_request(SEM, arrays, decoupled=decoupled, exclude_input_default=exclude)


# --- settings ------------------------------------------------------------------------------
def test_absent_keys_take_the_table_defaults():
    s = load_settings(SEM, config())
    for key in ("exclude_input_in_output", "enable_chunked_context", "enable_kv_cache_reuse",
                "cancellation_check_period_ms", "stats_check_period_ms", "max_beam_width", "batch_scheduler_policy"):
        assert getattr(s, key) == SEM.parameter(key).default, key
    assert s.max_queue_size == 8 and s.decoupled


def test_values_are_parsed_like_upstream():
    s = load_settings(SEM, config(cancellation_check_period_ms="250ms", exclude_input_in_output="TRUE",
                                  enable_kv_cache_reuse="yes", batch_scheduler_policy="fifo"))
    assert s.cancellation_check_period_ms == 250  # std::stoi reads a prefix
    assert s.exclude_input_in_output is True
    assert s.enable_kv_cache_reuse is SEM.parameter("enable_kv_cache_reuse").default  # 'yes' is no bool upstream
    assert s.batch_scheduler_policy == "guaranteed_no_evict"  # invalid: warning, default kept


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_required_keys_fail_the_load_with_upstreams_text(key):
    with pytest.raises(RuntimeError) as err:
        load_settings(SEM, config(**{key: None}))
    assert str(err.value) == f"unexpected error when creating modelInstanceState: Cannot find parameter with name: {key}"


def test_invalid_batching_type_and_what_the_stand_in_lacks():
    with pytest.raises(RuntimeError, match="Invalid gpt_model_type. Must be v1/inflight_batching/inflight_fused_batching."):
        load_settings(SEM, config(gpt_model_type="dynamic"))
    for params in ({"gpt_model_type": "v1"}, {"max_beam_width": "2"}):
        with pytest.raises(StandinLimitation, match="stand-in"):
            load_settings(SEM, config(**params))


TOKENIZER_INFO = {"encoded_vocab": ["a", "b"], "tokenizer_str": "{}", "stop_token_ids": [1]}


def test_guided_decoding_is_configured_as_upstream_reads_it(tmp_path):
    """Rows guided.config, guided.info_missing, guided.tokenizer_info, guided.backend_invalid:
    off while either key is empty or an unfilled placeholder; set, the file must exist and hold
    the three keys, and only xgrammar is a backend; each failure fails the load, in that order."""
    info = tmp_path / "info.json"
    assert not load_settings(SEM, config(guided_decoding_backend="${guided_decoding_backend}",
                                         xgrammar_tokenizer_info_path=str(info))).guided_decoding
    assert not load_settings(SEM, config(guided_decoding_backend="xgrammar")).guided_decoding
    prefix = "unexpected error when creating modelInstanceState: "
    with pytest.raises(RuntimeError) as e:
        load_settings(SEM, config(guided_decoding_backend="outlines", xgrammar_tokenizer_info_path=str(info)))
    assert str(e.value) == (f"{prefix}[TensorRT-LLM][ERROR] Assertion failed: Xgrammar's tokenizer info path at "
                            f"{info} does not exist.")
    info.write_text(json.dumps({k: v for k, v in TOKENIZER_INFO.items() if k != "tokenizer_str"}))
    with pytest.raises(RuntimeError, match="'tokenizer_str' must be a str"):
        load_settings(SEM, config(guided_decoding_backend="xgrammar", xgrammar_tokenizer_info_path=str(info)))
    info.write_text(json.dumps(TOKENIZER_INFO))
    with pytest.raises(RuntimeError) as e:
        load_settings(SEM, config(guided_decoding_backend="outlines", xgrammar_tokenizer_info_path=str(info)))
    assert str(e.value) == (prefix + "Guided decoding is currently supported with 'xgrammar' backend. "
                            "Invalid guided_decoding_backend parameter provided.")
    assert load_settings(SEM, config(guided_decoding_backend="xgrammar",
                                     xgrammar_tokenizer_info_path=str(info))).guided_decoding


def _guided(kind, guide=None, guided=True):
    arrays = request()
    arrays["guided_decoding_guide_type"] = np.array([[kind.encode()]], dtype=object)
    if guide is not None:
        arrays["guided_decoding_guide"] = np.array([[guide.encode()]], dtype=object)
    return parse_request(SEM, arrays, decoupled=True, exclude_input_default=True, guided=guided)[0].inputs.options


def test_guide_types_map_as_upstream_and_unknown_ones_decode_unguided():
    """Row input.guided_decoding_guide_type: four types; any other string is no guide at all
    (no error upstream); kJSON compiles the built-in JSON grammar and ignores the guide."""
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    options = _guided("json_schema", schema)
    assert (options.guided_decoding_guide_type, options.guided_decoding_guide) == ("json_schema", schema)
    assert _guided("regex", "[0-9]+").guided_decoding_guide_type == "regex"
    assert _guided("json", "ignored").guided_decoding_guide == ""
    assert _guided("yaml", "a: b").guided_decoding_guide_type == ""
    with pytest.raises(StandinLimitation, match="uniqueItems"):  # the CPU engine would drop it: refused
        _guided("json_schema", json.dumps({"type": "array", "uniqueItems": True}))
    with pytest.raises(StandinLimitation, match="guided decoding"):  # no guided decoder configured
        _guided("json_schema", schema, guided=False)


def test_queue_bound_comes_from_the_queue_policy_only():
    raw = config(max_queue_size="3")
    del raw["dynamic_batching"]
    assert load_settings(SEM, raw).max_queue_size == 0  # a `parameters` key is not read


@pytest.mark.parametrize("version", SUPPORTED_VERSIONS)
def test_effective_max_input_len(version):
    limits = EngineLimits(max_batch_size=8, max_seq_len=2048, max_num_tokens=512, vocab_size_padded=100)
    sem = backend_semantics(version)
    assert limits.max_input_len(sem, enable_chunked_context=False) == 512
    assert limits.max_input_len(sem, enable_chunked_context=True) == 2047


def test_engine_limits_from_the_build_record(tmp_path):
    (tmp_path / "build.json").write_text(json.dumps({
        "format_version": 1, "backend": "openvino", "checkpoint": {}, "versions": {}, "built_at": "", "build_seconds": 0,
        "spec": {"limits": {"max_batch_size": 4, "max_seq_len": 256, "max_num_tokens": 64, "max_input_len": 128}}}))
    (tmp_path / "config.json").write_text('{"vocab_size": 1000}')
    assert engine_limits(tmp_path) == EngineLimits(4, 256, 64, 1000)


# --- parsing -------------------------------------------------------------------------------
def expect(rule_id, arrays, **kwargs) -> UpstreamError:
    with pytest.raises(UpstreamError) as err:
        parse(arrays, **kwargs)
    assert err.value.rule_id == rule_id and err.value.code == "INTERNAL"
    return err.value


def test_missing_and_malformed_inputs_are_refused_with_upstreams_texts():
    assert expect("error.missing_input_ids", request(input_ids=np.array(None))).message == \
        "inputTokens or encoderInputFeatures tensor not provided"
    assert expect("error.input_ids_rank", request(input_ids=np.array([5, 6]))).message.endswith(
        "Assertion failed: Expected inputTokens tensors to have 2 dimensions")
    assert expect("error.missing_request_output_len", request(request_output_len=np.array(None))).message == \
        "request_output_len is not present in the request"
    assert expect("error.scalar_size", request(end_id=np.array([2, 3]))).message == \
        "[TensorRT-LLM][ERROR] Assertion failed: Invalid size for tensor end_id"
    two_rows = request(input_ids=np.array([[5, 6], [7, 0]]), input_lengths=np.array(None))
    expect("error.input_lengths_for_batch", two_rows)


def test_streaming_and_batches_need_decoupled_mode():
    expect("error.streaming_needs_decoupled", request(streaming=np.array([True])), decoupled=False)
    rows = request(input_ids=np.array([[5, 6], [7, 0]]), input_lengths=np.array([2, 1]),
                   request_output_len=np.array([4, 4]))
    expect("error.batch_needs_decoupled", rows, decoupled=False)
    assert [r.inputs.input_ids for r in parse(rows)] == [(5, 6), (7,)]  # cut to input_lengths


def test_one_row_ignores_input_lengths():
    (r,) = parse(request(input_lengths=np.array([1])))
    assert r.inputs.input_ids == (5, 6, 7)  # row request.batch_split


def test_unset_sampling_is_greedy_and_top_p_alone_samples():
    (r,) = parse(request())
    assert (r.inputs.runtime_top_k, r.inputs.runtime_top_p, r.inputs.temperature) == (0, 0.0, 1.0)
    assert r.inputs.is_greedy and r.inputs.min_tokens == 1 and r.end_id is None and r.beam_width == 1
    (r,) = parse(request(runtime_top_p=np.array([0.9], np.float32)))
    assert not r.inputs.is_greedy  # top-k 0 with top-p: top-p sampling (row sampling.greedy_rule)
    (r,) = parse(request(runtime_top_p=np.array([-1.0], np.float32)))
    assert r.inputs.runtime_top_p == 0.0 and r.inputs.is_greedy  # a top_p <= 0 is dropped


def test_sampling_checks_fail_with_the_failed_expression():
    e = expect("error.sampling_config", request(runtime_top_p=np.array([1.5], np.float32)))
    assert e.message == "[TensorRT-LLM][ERROR] Assertion failed: topP.value() <= 1.f"
    expect("error.sampling_config", request(temperature=np.array([-0.1], np.float32)))
    expect("error.sampling_config", request(repetition_penalty=np.array([0.0], np.float32)))


def test_exclude_input_in_output_request_wins_over_the_parameter():
    assert parse(request(), exclude=False)[0].exclude_input_in_output is False
    assert parse(request(exclude_input_in_output=np.array([True])), exclude=False)[0].exclude_input_in_output


def test_stop_detection_reads_the_first_element():
    assert is_stop({"stop": np.array([True])}) and not is_stop({"stop": np.array([False])}) and not is_stop({})


@pytest.mark.parametrize("sparse, words", [([5, 6, 7, 2, 3, -1], ((5, 6), (7,))), ([9, 0, 1, -1], ((9,),)),
                                           ([4, 1], ((4,),))])
def test_word_lists(sparse, words):
    assert convert_word_list(SEM, sparse) == words


@pytest.mark.parametrize("sparse, rule_id", [([1, 2, 3], "error.word_list_odd"), ([5, 6, 1, -1, 2, -1], "error.word_list_extra_pad"),
                                             ([5, 6, 3, -1], "error.word_list_offset_bound"),
                                             ([5, 6, 7, 2, 1, -1], "error.word_list_offset_order")])
def test_malformed_word_lists(sparse, rule_id):
    with pytest.raises(UpstreamError) as err:
        convert_word_list(SEM, sparse)
    assert err.value.rule_id == rule_id
    assert err.value.message.endswith(": " + "".join(f"{v} " for v in sparse))


def test_stop_words_reach_the_engine_and_bad_words_are_a_stand_in_limitation():
    (r,) = parse(request(stop_words_list=np.array([[[5, 6, 7], [2, 3, -1]]], np.int32)))
    assert r.inputs.stop_words_list == ((5, 6), (7,))
    with pytest.raises(StandinLimitation, match="bad_words_list"):
        parse(request(bad_words_list=np.array([[[5], [1]]], np.int32)))


# --- registry ------------------------------------------------------------------------------
def test_registry_replaces_duplicates_and_ignores_empty_ids():
    reg = TritonIdRegistry()
    reg.register("a", [1])
    reg.register("a", [2])  # the earlier request can no longer be stopped by id
    reg.register("", [3])
    assert reg.lookup("a") == {2} and reg.lookup("") == set() and len(reg) == 1
    reg.finished("a", 1)  # the replaced request ending leaves the new entry alone
    assert reg.lookup("a") == {2}
    reg.finished("a", 2)
    assert reg.lookup("a") == set() and len(reg) == 0


# --- results -------------------------------------------------------------------------------
def test_streaming_results_hold_new_tokens_and_drop_the_end_id():
    row = RowState(prompt=(1, 2), streaming=True, exclude_input=True, end_id=9, return_log_probs=True)
    first = row.add([4], [-0.5], -0.5, False)
    last = row.add([5, 9], [-0.25, -0.125], -0.875, True)
    assert (first.output_ids, last.output_ids) == ((4,), (5,))
    assert last.log_probs == (-0.5, -0.25)  # every generated token's so far, the end id's left out
    assert last.cum_log_prob == -0.875  # the end id's log prob stays in the sum
    arrays = response_arrays(SEM, last, ALL)
    assert arrays["output_ids"].shape == (1, 1, 1) and arrays["sequence_length"].tolist() == [[1]]
    assert arrays["output_log_probs"].shape == (1, 1, 2) and arrays["cum_log_probs"].shape == (1, 1)


def test_non_streaming_result_includes_the_prompt_unless_excluded():
    row = RowState(prompt=(1, 2), streaming=False, exclude_input=False, end_id=9, return_log_probs=False)
    result = row.add([4, 5, 9], [], 0.0, True)
    assert result.output_ids == (1, 2, 4, 5)
    arrays = response_arrays(SEM, result, ALL)
    assert set(arrays) == {"output_ids", "sequence_length"}  # no log probs unless asked
    assert arrays["sequence_length"].tolist() == [[4]]


def test_output_ids_and_sequence_length_must_be_requested():
    result = RowState((1,), False, True, None, False).add([4], [], 0.0, True)
    with pytest.raises(UpstreamError, match="sequence_length tensor must be present in list of output tensors"):
        response_arrays(SEM, result, {"output_ids"})
