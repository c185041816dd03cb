"""NVIDIA's Triton models as cited data: every table loads, and the facts the kit relies on hold."""

import pytest

from contract.upstream import triton_models as tm
from contract.upstream.citation import UpstreamTableError, load_table


@pytest.fixture(params=tm.VERSIONS)
def version(request):
    return request.param


def test_every_version_has_the_five_models(version):
    models = tm.load_models(version)
    assert set(models) == set(tm.MODELS)
    for model in models.values():
        assert model.inputs and model.outputs
        assert model.max_batch_size == "${triton_max_batch_size}"
        assert model.citation.source.repo == "NVIDIA/TensorRT-LLM"
        assert model.citation.confirmed or model.citation.note


def test_unknown_version_is_refused():
    with pytest.raises(UpstreamTableError, match="1.0.0"):
        tm.load_models("1.0.0")


def test_every_citation_names_a_source_and_unconfirmed_ones_say_why(version):
    for name in (f"triton_models_{version}", f"nvidia_behaviours_{version}"):
        table = load_table(name)
        for row in table.rows:
            for citation in tm.citations(table, row):
                assert citation.confirmed or citation.note, row


def test_the_clients_first_tensor_is_declared_everywhere(version):
    """beam_width (what every NVIDIA gRPC client sends) is an optional INT32 [1] of the
    ensemble, the BLS and tensorrt_llm."""
    models = tm.load_models(version)
    for name in ("ensemble", "tensorrt_llm_bls", "tensorrt_llm"):
        beam = models[name].input("beam_width")
        assert (beam.data_type, beam.dims, beam.optional, beam.wire_dtype) == ("TYPE_INT32", (1,), True, "INT32")


def test_text_output_is_one_dimensional_on_the_wire(version):
    models = tm.load_models(version)
    for name in ("ensemble", "tensorrt_llm_bls"):
        text = models[name].output("text_output")
        assert text.dims == (-1,) and text.wire_shape == (1,) and text.wire_note
    assert models["postprocessing"].output("OUTPUT").wire_shape == (1,)


def test_names_of_this_generation(version):
    ensemble = tm.load_models(version)["ensemble"]
    assert {"min_tokens", "seed", "num_return_sequences", "return_perf_metrics"} <= set(ensemble.input_names)
    assert not {"min_length", "random_seed"} & set(ensemble.input_names)
    assert {"batch_index", "sequence_index", "num_input_tokens"} <= set(ensemble.output_names)


def test_decoupled_is_a_deployment_choice(version):
    models = tm.load_models(version)
    assert models["tensorrt_llm"].decoupled_by_deployment and models["tensorrt_llm_bls"].decoupled_by_deployment
    assert models["ensemble"].decoupled is False and models["preprocessing"].decoupled is False


def test_templated_dtypes_have_no_wire_dtype(version):
    generation_logits = tm.load_models(version)["ensemble"].output("generation_logits")
    assert generation_logits.templated and generation_logits.wire_dtype is None


def test_ensemble_wiring(version):
    assert tm.fed_by(version, "top_k") == (("tensorrt_llm", "runtime_top_k"),)
    assert tm.fed_by(version, "stream") == (("tensorrt_llm", "streaming"),)
    assert tm.fed_by(version, "text_input") == (("preprocessing", "QUERY"),)
    assert ("tensorrt_llm", "beam_width") in tm.fed_by(version, "beam_width")


def test_ensemble_outputs_are_unique_by_name(version):
    ensemble = tm.load_models(version)["ensemble"]
    assert len(ensemble.outputs) == len(ensemble.output_names) + 1  # kv_cache_alloc_total_blocks twice upstream


def test_parameters_carry_their_docs_line(version):
    trt = {p.key: p for p in tm.load_models(version)["tensorrt_llm"].parameters}
    assert trt["exclude_input_in_output"].documented_at is not None
    assert trt["exclude_input_in_output"].documented_at.confirmed
    assert trt["enable_trt_overlap"].commented_out


def test_behaviours_cover_the_issue(version):
    behaviours = tm.load_behaviours(version)
    for key in ("greedy_without_top_k_top_p", "streaming_never_echoes_prompt", "stop_words_token_sequences",
                "stop_word_kept_in_output", "bad_words_token_sequences", "beam_width", "num_return_sequences",
                "batch_index_sequence_index", "return_perf_metrics_outputs", "min_tokens_naming",
                "request_parameters_read", "text_output_wire_shape"):
        assert behaviours[key].fact and behaviours[key].citation.source.path
