"""NVIDIA's client requests as data, and their consistency with NVIDIA's own model tables."""

import pytest

from contract.upstream import nvidia_clients as nc
from contract.upstream import triton_models as tm

E2E = "end_to_end_grpc_client.py"
ISSUE_CASES = ("default", "streaming", "exclude_input_in_output", "return_log_probs", "stop_words", "batch_inputs",
               "check_outputs_greedy", "model_name_bls")


def test_every_case_loads_with_a_citation():
    cases = nc.load_client_cases()
    assert len({(c.script, c.case) for c in cases}) == len(cases)
    for case in cases:
        assert case.requests and case.citation.source.path and case.client_version


@pytest.mark.parametrize("case", ISSUE_CASES)
def test_issue_cases_of_end_to_end_grpc_client(case):
    c = nc.client_case(E2E, case)
    assert c.model in ("ensemble", "tensorrt_llm_bls") and c.requests[0].transport == "grpc_stream"
    beam = c.requests[0].input("beam_width")
    assert (beam.datatype, beam.value) == ("INT32", 1)
    assert c.outputs[0] == "text_output" and "output[0].decode" in c.reads[0]


def test_batch_inputs_ask_for_batch_index():
    c = nc.client_case(E2E, "batch_inputs")
    assert all(t.batch == 3 for t in c.inputs)
    assert "batch_index" in c.outputs


def test_the_stop_request_reuses_the_request_id():
    run, stop = nc.client_case("inflight_batcher_llm_client.py", "stop_after_ms").requests
    assert run.request_id == stop.request_id == "1"
    assert stop.input("stop").value is True and stop.parameters == {"Streaming": True}


@pytest.mark.parametrize("version", tm.VERSIONS)
def test_what_nvidia_clients_send_nvidia_declares(version):
    """Every tensor a recorded client sends is an input of NVIDIA's model with the same datatype,
    except genai-perf's min_length (pre-1.0 name, recorded as such)."""
    models = tm.load_models(version)
    for case in nc.load_client_cases():
        for request in case.requests:
            model = models.get(request.model)
            if model is None or not request.inputs:
                continue
            for sent in request.inputs:
                if sent.name == "min_length":
                    assert "genai-perf" in case.script
                    continue
                declared = model.input(sent.name)
                assert declared.wire_dtype == sent.datatype, (case.case, sent.name)
                assert len(sent.shape) == len(declared.wire_shape), (case.case, sent.name)


@pytest.mark.parametrize("version", tm.VERSIONS)
def test_outputs_nvidia_clients_ask_for_exist(version):
    models = tm.load_models(version)
    for case in nc.load_client_cases():
        for request in case.requests:
            if request.outputs and request.model in models:
                assert set(request.outputs) <= set(models[request.model].output_names), case.case


def test_contract_diff_finds_nothing_missing_when_we_mirror_nvidia():
    """The comparison itself: a model that declares exactly NVIDIA's tensors differs in nothing
    (but the wire shape of text_output, which the dims cannot express)."""
    from contract import tensors as ours
    from contract.upstream import contract_diff

    ensemble = tm.load_models("1.1.0")["ensemble"]
    dtypes = {d.config_name: d for d in ours.DType}
    mirror = tuple(ours.TensorSpec(t.name, dtypes[t.data_type], t.dims, optional=t.optional)
                   for t in ensemble.inputs if t.data_type in dtypes)
    diff = contract_diff.diff_tensors(ensemble.inputs, mirror, outputs=False)
    assert not diff.differ and not diff.extra
    assert {t.name for t in diff.missing} == {t.name for t in ensemble.inputs if t.data_type not in dtypes}


def test_contract_diff_report_renders():
    from contract.upstream import contract_diff

    for version in tm.VERSIONS:
        text = contract_diff.report(version)
        for name in tm.MODELS:
            assert f"### {name} inputs" in text
