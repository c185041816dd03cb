"""The typed views of the C++ backend's request semantics and of the LLM API tables load and say what upstream says."""

import string

import pytest

from contract.upstream.backend_semantics import SUPPORTED_VERSIONS as BACKEND_VERSIONS
from contract.upstream.backend_semantics import backend_semantics
from contract.upstream.citation import UpstreamTableError
from contract.upstream.llmapi import REQUIRED
from contract.upstream.llmapi import SUPPORTED_VERSIONS as API_VERSIONS
from contract.upstream.llmapi import llmapi


@pytest.mark.parametrize("version", BACKEND_VERSIONS)
def test_backend_rows_all_have_a_typed_home_and_a_citation(version):
    sem = backend_semantics(version)
    assert sem.table.upstream_version == version
    assert len(sem.rules) == len(sem.table.rows), "duplicate rule ids"
    for rule in sem.rules.values():
        assert rule.citation.source.path and rule.rule
        assert rule.citation.confirmed or rule.citation.note
        assert rule.citation.lines or rule.extra.get("locator"), f"{rule.id}: neither lines nor a locator"


@pytest.mark.parametrize("version", BACKEND_VERSIONS)
def test_backend_stop_and_request_id_rules(version):
    sem = backend_semantics(version)
    assert sem.rule("request_id.map").extra["key"] == "mTritonRequestIdToRequestIds"
    assert sem.rule("request_id.map").extra["duplicate_id"] == "replaces_previous_entry"
    empty = sem.error("stop.empty_id")
    assert (empty.code, empty.render()) == ("INTERNAL", "Trying to stop a request but request ID is not provided")
    assert sem.rule("stop.reply").extra["flags"] == "COMPLETE_FINAL"


@pytest.mark.parametrize("version", BACKEND_VERSIONS)
def test_backend_cancellation_and_limits(version):
    sem = backend_semantics(version)
    assert sem.parameter("cancellation_check_period_ms").default == 100
    assert sem.rule("cancel.poll").extra["api"] == "TRITONBACKEND_ResponseFactoryIsCancelled"
    assert sem.rule("limit.max_input_len").extra["formula"]["context_fmha_packed_input"] == "min(max_seq_len - 1, max_num_tokens)"
    assert sem.error("error.queue_full").render(max_queue_size=4) == (
        "Maximum queue size of 4 has been reached, please try again later")
    too_long = sem.error("error.prompt_too_long").render(executor_request_id=7, prompt_len=600, max_input_len=512)
    assert "Prompt length (600) exceeds maximum input length (512)" in too_long
    assert too_long.startswith("Executor failed process requestId 7")


@pytest.mark.parametrize("version", BACKEND_VERSIONS)
def test_backend_error_templates_render_with_their_own_fields(version):
    for err in backend_semantics(version).errors.values():
        fields = {name: "x" for _, name, _, _ in string.Formatter().parse(err.message) if name}
        assert err.render(**fields)
        assert err.delivery in {"enqueue_response", "final_response"} and err.where in {"backend", "executor"}


@pytest.mark.parametrize("version", BACKEND_VERSIONS)
def test_backend_inputs_outputs_and_parameters(version):
    sem = backend_semantics(version)
    assert sem.input("input_ids").required and sem.input("request_output_len").required
    assert not sem.input("end_id").required and sem.input("end_id").default is None
    assert sem.input("beam_width").default == 1
    assert {"seed", "min_tokens"} <= set(sem.inputs)  # the 1.x names (v0.19.0: random_seed, min_length)
    assert sem.outputs["output_ids"].shape == "[1, beams, max_beam_len]"
    assert sem.parameter("exclude_input_in_output").default is False
    assert sem.parameter("enable_kv_cache_reuse").default is True
    assert sem.parameter("tokenizer_dir").required
    assert sem.parameter("batch_scheduler_policy").citation.confirmed  # read in the docs at the Triton branch itself


def test_backend_unknown_version_and_rule_are_named():
    with pytest.raises(UpstreamTableError, match="9.9.9"):
        backend_semantics("9.9.9")
    with pytest.raises(UpstreamTableError, match="no rule 'nope'"):
        backend_semantics("1.1.0").rule("nope")


@pytest.mark.parametrize("version", API_VERSIONS)
def test_llmapi_generate_async_signature(version):
    sig = llmapi(version).signature("LLM.generate_async")
    assert sig.names()[:5] == ("inputs", "sampling_params", "lora_request", "prompt_adapter_request", "streaming")
    assert sig.param("inputs").required and sig.param("inputs").default == REQUIRED
    assert sig.param("streaming").default is False
    init = llmapi(version).signature("LLM.__init__")
    assert init.param("tensor_parallel_size").default == 1 and init.names()[0] == "model"


@pytest.mark.parametrize("version", API_VERSIONS)
def test_llmapi_sampling_fields_and_errors(version):
    api = llmapi(version)
    f = api.sampling_fields
    assert f["max_tokens"].default == 32 and f["n"].default == 1
    assert f["exclude_input_from_output"].default is True
    assert all(f[k].default is None for k in ("top_k", "top_p", "temperature", "seed", "end_id", "pad_id", "stop_token_ids"))
    assert api.errors["sampling.validate.top_p"].render(top_p=2) == "require 0 <= top_p <= 1, got top_p=2"
    msg = api.errors["llm.max_num_tokens_check"].render(prompt_len_over_cp=600.0, query_len=0, max_num_tokens=512)
    assert msg == "The sum of prompt length (600.0), query length (0) should not exceed max_num_tokens (512)"


@pytest.mark.parametrize("version", API_VERSIONS)
def test_llmapi_triton_model_facts(version):
    api = llmapi(version)
    assert api.rule("triton.config.batching").extra["max_batch_size"] == 0
    assert api.rule("triton.cancellation").extra["message"] == "Request cancelled by client"
    assert "stop" in api.rule("triton.inputs").extra["names"]
    assert set(api.rule("result.fields").extra["finish_reasons"]) == {"stop", "length", "timeout", "cancelled"}
    assert all(not r.citation.confirmed and r.citation.note for r in api.rules.values())
