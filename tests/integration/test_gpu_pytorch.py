"""TensorRT-LLM's PyTorch backend end to end (inside the kit's 26.04 - 26.07 GPU image, on a GPU
host; skipped elsewhere): prepare the default model for `tensorrt_llm_pytorch` (no compile),
serve it with `serving gpu-up` (one tritonserver; the real `tensorrt_llm.LLM`), and run the
layout tests the stand-in runs on CPU against the real LLM API.

    TRITON_IMAGE=nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 TRTLLM_VERSION=1.2.1 \
    KIT_GPU_IMAGE=llama-triton-kit-trtllm:26.07 MODELOPT_EXAMPLES_REF=0.37.0 \
    docker compose --profile build run --rm -v "$PWD:/workspace" -e PYTHONPATH=/workspace \
        --entrypoint /opt/nvidia/nvidia_entrypoint.sh builder python3 -m pytest tests/integration/test_gpu_pytorch.py
    (the 26.07 settings: build_engines/images/gpu_images.py, `gpu_image("26.07").compose_env()`)
"""

from __future__ import annotations

import pytest

from client import ChatMessage, LlmClient, SamplingParams
from contract import metrics as m
from contract import names
from serving.launcher import ServerSettings
from serving.prometheus import scrape, value
from tests.integration import test_bad_requests as cpu_bad_requests
from tests.integration import test_cancellation as cancellation_tests
from tests.integration.conftest import ROOT
from tests.integration.test_gpu_pipeline import (  # noqa: F401  (NVIDIA's clients and the benchmark, here too)
    _gpu_up,
    check_precision,
    reference,
    served,
    test_batch_inputs_are_demultiplexed_by_batch_index,
    test_bls_by_its_nvidia_name_answers_as_the_ensemble,
    test_check_outputs_with_greedy_settings_is_deterministic,
    test_default_echoes_the_prompt_and_completes,
    test_docs_curl_generate,
    test_docs_curl_generate_stream,
    test_docs_generate_stream_with_a_parameters_object,
    test_exclude_input_in_output_returns_the_completion_only,
    test_return_log_probs,
    test_short_benchmark,
    test_stop_words_end_the_completion_at_the_first_match,
    test_streaming_chunks_concatenate_to_the_completion,
)
from tests.integration.test_streaming_text import (  # noqa: F401  (the same tests, GPU fixtures)
    test_answers_do_contain_multibyte_text,
    test_prompt_is_not_echoed_unless_asked,
    test_stream_equals_whole_equals_full_decode,
)



def _pytorch_image() -> bool:
    """This image's TensorRT-LLM is one the PyTorch flow targets (1.2.1: images 26.04 - 26.07)."""
    from importlib import metadata

    from build_engines.pytorch.spec import pytorch_versions

    try:
        return metadata.version("tensorrt_llm") in pytorch_versions()
    except metadata.PackageNotFoundError:
        return False


pytestmark = [pytest.mark.gpu, pytest.mark.server, pytest.mark.slow,
              pytest.mark.skipif(not _pytorch_image(), reason="needs the 26.04 - 26.07 image (TensorRT-LLM 1.2.1)")]


def _pytorch_build(checkpoint, precision=None, **options):
    from build_engines.cli import default_engine_dir
    from build_engines.cli_options import make_spec
    from build_engines.pytorch.build import build_pytorch_engine, engine_is_built
    from contract.build_record import BuildRecord

    spec = make_spec(checkpoint, backend="tensorrt_llm_pytorch", precision=precision, max_batch_size=16, max_input_len=1024,
                     max_seq_len=2048, max_num_tokens=1024, default_max_tokens=256, prefix_caching=False, **options)
    engine_dir = ROOT / default_engine_dir(spec)
    if not (engine_is_built(engine_dir) and BuildRecord.read(engine_dir).spec == spec.to_dict()):
        build_pytorch_engine(spec, engine_dir)
    return engine_dir


@pytest.fixture(scope="session")
def pytorch_gpu_engine(default_checkpoint):
    """The default model at KIT_GPU_PRECISION (fp16 by default; bench/gpu_check.py sets it)."""
    precision, options = check_precision()
    return _pytorch_build(default_checkpoint, precision, **options)


@pytest.fixture(scope="session")
def server(pytorch_gpu_engine, tmp_path_factory):
    """Overrides the CPU server: the same tests now run against the real LLM API."""
    from build_engines.repository import render_repository

    repository = tmp_path_factory.mktemp("gpu-pytorch") / "repository"
    render_repository(pytorch_gpu_engine, repository)
    settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("gpu-pytorch-logs") / "server.log")
    yield from _gpu_up(settings)


@pytest.fixture(scope="session")
def client(server):
    with LlmClient(server.settings.grpc_url) as c:
        yield c


@pytest.fixture(scope="session")
def layout_client(client):
    return client


@pytest.mark.parametrize("values,field,message", [c for c in cpu_bad_requests.CASES if c[1] != "bad_words"])
def test_bad_request_gets_invalid_arg(server, values, field, message):
    _, error = cpu_bad_requests.raw_request(server.settings.grpc_url, **values)
    assert error is not None and "[INVALID_ARG]" in error.message() and f"'{field}'" in error.message(), error
    assert message in error.message()


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
def test_the_engine_stops_within_a_second_of_the_client_leaving(server, model):
    cancellation_tests.assert_engine_stops_within_a_second(server, model)


def test_answers_the_capital_question_through_both_entry_models(server, client):
    prompt = [ChatMessage("user", "What is the capital of France?")]
    greedy = SamplingParams(max_tokens=32, temperature=0.0)
    result = client.generate(prompt, greedy)
    assert "Paris" in result.text and result.finish_reason == "stop"
    with LlmClient(server.settings.grpc_url, model=names.LLM_BLS) as bls:
        assert bls.generate(prompt, greedy).token_ids == result.token_ids


def test_bad_words_are_refused_on_1_2_1(client):
    """TorchSampler at 1.2.1 accepts bad_token_ids and ignores them (PR #16052, after 1.2.1;
    contract/upstream/data/sampling_support_1.2.1.json): refused by name, never ignored."""
    from client import InvalidRequestError

    with pytest.raises(InvalidRequestError, match="'bad_words'.*1.2.1"):
        client.generate([ChatMessage("user", "What is the capital of France?")],
                        SamplingParams(max_tokens=32, temperature=0.0, bad_words=(" Paris",)))


def test_kv_cache_usage_is_published(server, client):
    client.generate("Tell me a story about a brave knight.", SamplingParams(max_tokens=64, temperature=0.0))
    assert value(scrape(server.settings.metrics_url), m.GENERATED_TOKENS.name, model=names.PYTORCH_ENGINE) > 0
    assert m.KV_CACHE_USAGE.name in scrape(server.settings.metrics_url)


def test_fp8_quantized_by_modelopt_answers(default_checkpoint, tmp_path_factory):
    """hf_ptq.py calibrates on the kit's local calibration data (build_engines/calibration_data.py): no hub."""
    from build_engines.calibration_data import write_calibration_dataset
    from build_engines.checkpoint_quant import read_quantization
    from build_engines.repository import render_repository

    calibration = write_calibration_dataset(tmp_path_factory.mktemp("calibration"), rows=32)
    engine = _pytorch_build(default_checkpoint, "fp8", kv_cache_dtype="fp8", calib_dataset=str(calibration.directory),
                            calib_size=32)
    quant = read_quantization(engine / "model")
    assert (quant.method, quant.quant_algo, quant.kv_cache_quant_algo) == ("modelopt", "FP8", "FP8")
    repository = tmp_path_factory.mktemp("gpu-fp8") / "repository"
    render_repository(engine, repository)
    settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("gpu-fp8-logs") / "server.log")
    for served in _gpu_up(settings):
        with LlmClient(served.settings.grpc_url) as c:
            result = c.generate([ChatMessage("user", "What is the capital of France?")],
                                SamplingParams(max_tokens=32, temperature=0.0))
            assert "Paris" in result.text


def test_guided_decoding_and_n_samples(server, tmp_path):
    """LLM(guided_decoding_backend='xgrammar') with its tokenizer, GuidedDecodingParams per
    request, and SamplingParams.n, through the gRPC client and the OpenAI front."""
    import openai

    from tests.integration import test_generation_features as features_tests
    from tests.integration.openai_front_process import running_front

    with running_front(server.settings.grpc_url, tmp_path) as base:
        oai_client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        features_tests.check_guided_decoding(server.settings.grpc_url, oai_client)
        features_tests.check_n_samples(server.settings.grpc_url, oai_client, seeded=False)  # 1.2.1 refuses seeds


def test_top_logprobs_and_the_top_k_rule(server, default_checkpoint):
    """SamplingParams.logprobs = k on the real LLM API: k alternatives per position, the greedy
    choice first, each within the INT8-engine tolerances of the float32 checkpoint (the CPU
    checks); and row result.logprobs.top_k, read at a commit rather than the tag: at 1.2.x the
    LLM's dicts hold the top k only, so log probs of sampled requests are refused by name."""
    from client import InvalidRequestError
    from tests.integration import test_generation_features as features_tests

    features_tests.check_top_logprobs(features_tests._served_top_logprobs(server.settings.grpc_url),
                                      default_checkpoint)
    with LlmClient(server.settings.grpc_url) as client:
        with pytest.raises(InvalidRequestError, match=r"'return_log_probs' with sampling.*result\.logprobs\.top_k"):
            client.generate("Hi", SamplingParams(max_tokens=4, temperature=1.0, return_log_probs=True))
