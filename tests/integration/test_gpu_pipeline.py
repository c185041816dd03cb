"""The GPU pipeline end to end (inside the kit's GPU image, on a GPU host; skipped elsewhere):
build a small TensorRT-LLM engine from the default model, serve it with `serving gpu-up`
(the NGC tritonserver, C++ tensorrt_llm backend behind engine_relay), and run the CPU
pipeline's end-to-end tests against it.

    make test-gpu   # in the compose builder service, this checkout mounted at /workspace
    make gpu-check  # the check of a GPU host: these suites at fp16 (and fp8 on Hopper), one report

KIT_GPU_PRECISION picks the engine's precision (fp16 by default; fp8 quantizes weights and KV
cache, calibrated on KIT_GPU_CALIB_DATASET): bench/gpu_check.py runs this file once per precision.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from client import ChatMessage, LlmClient, SamplingParams
from contract import names
from serving.launcher import ServerSettings, TritonServer
from tests.integration import test_bad_requests as cpu_bad_requests
from tests.integration import test_cancellation as cancellation_tests
from tests.integration import test_engine_relay as relay_tests
from tests.integration import test_tensorrt_llm_bls as bls_tests
from tests.integration import test_concurrency as concurrency_tests
from tests.integration import test_streaming_text as streaming_tests
from tests.integration.conftest import ROOT
from tests.integration.openai_front_process import running_front
from tests.integration.test_nvidia_clients import (  # noqa: F401  (NVIDIA's clients, on the GPU server)
    reference,
    test_batch_inputs_are_demultiplexed_by_batch_index,
    test_bls_by_its_nvidia_name_answers_as_the_ensemble,
    test_check_outputs_with_greedy_settings_is_deterministic,
    test_default_echoes_the_prompt_and_completes,
    test_docs_curl_generate,
    test_docs_curl_generate_stream,
    test_docs_generate_stream_with_a_parameters_object,
    test_exclude_input_in_output_returns_the_completion_only,
    test_return_log_probs,
    test_stop_words_end_the_completion_at_the_first_match,
    test_streaming_chunks_concatenate_to_the_completion,
)

pytestmark = [pytest.mark.gpu, pytest.mark.server, pytest.mark.slow]


def check_precision() -> tuple[str, dict]:
    """The precision the served engine has (KIT_GPU_PRECISION), and the make_spec options it needs."""
    from bench.gpu_check import CALIB_ENV, DEFAULT_CALIB_DATASET, PRECISION_ENV

    precision = os.environ.get(PRECISION_ENV, "fp16")
    if precision != "fp8":
        return precision, {}
    return precision, {"kv_cache_dtype": "fp8", "calib_dataset": os.environ.get(CALIB_ENV, DEFAULT_CALIB_DATASET)}


@pytest.fixture(scope="session")
def gpu_engine(default_checkpoint):
    from build_engines.cli_options import make_spec
    from build_engines.trtllm.build import build_trtllm_engine, engine_is_built
    from contract.build_record import BuildRecord

    precision, options = check_precision()
    spec = make_spec(default_checkpoint, backend="tensorrt_llm", precision=precision, max_batch_size=16,
                     max_input_len=1024, max_seq_len=2048, max_num_tokens=1024, default_max_tokens=256, **options)
    engine_dir = ROOT / "build" / "engines" / f"SmolLM2-135M-Instruct-tensorrt_llm-{precision}-tp1-pp1"
    if not (engine_is_built(engine_dir) and BuildRecord.read(engine_dir).spec == spec.to_dict()):
        build_trtllm_engine(spec, engine_dir)
    return engine_dir


@pytest.fixture(scope="session")
def server(gpu_engine, tmp_path_factory):
    """Overrides the CPU server: the same tests now run against TensorRT-LLM."""
    from build_engines.repository import render_repository

    repository = tmp_path_factory.mktemp("gpu") / "repository"
    render_repository(gpu_engine, repository)
    settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("gpu-logs") / "server.log")
    yield from _gpu_up(settings)


def _gpu_up(settings):
    """`serving gpu-up` on these settings until the fixture ends."""
    repository = settings.repository
    cmd = [sys.executable, "-m", "serving", "gpu-up", "--repository", str(repository), "--host", settings.host,
           "--http-port", str(settings.http_port), "--grpc-port", str(settings.grpc_port),
           "--metrics-port", str(settings.metrics_port), "--exit-timeout", "10"]
    with open(settings.log_file, "ab") as log:
        process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    probe = TritonServer(settings)
    deadline = time.monotonic() + 600
    while not probe.is_ready():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("the GPU server did not become ready:\n" + probe.log_tail())
        time.sleep(1)
    yield probe
    process.terminate()
    process.wait(60)


@pytest.fixture(scope="session")
def client(server):
    with LlmClient(server.settings.grpc_url) as c:
        yield c


@pytest.fixture(scope="module")
def served(server):
    """What NVIDIA's client suite (tests/integration/test_nvidia_clients.py) replays against."""
    return server


def test_short_benchmark(server):
    """gpu-check's numbers: output tok/s, TTFT and ITL through the ensemble at concurrency 1 and
    16 (128-token answers, the kit's light closed-loop client); in-flight batching must raise
    the output rate.  Written to KIT_GPU_BENCH_OUT when set."""
    import asyncio

    from bench.gpu_check import BENCH_OUT_ENV
    from bench.throughput import run_closed_loop
    from bench.workload import fixed_length_jobs

    url = server.settings.grpc_url
    asyncio.run(run_closed_loop(url, fixed_length_jobs(2, 8, seed=99), 2))  # warm-up
    levels = [asyncio.run(run_closed_loop(url, fixed_length_jobs(requests, 128, seed=level), level)).to_dict()
              for level, requests in ((1, 4), (16, 48))]
    if os.environ.get(BENCH_OUT_ENV):
        Path(os.environ[BENCH_OUT_ENV]).write_text(json.dumps({"precision": check_precision()[0], "levels": levels},
                                                              indent=2) + "\n")
    assert levels[1]["output_tokens_per_s"] > levels[0]["output_tokens_per_s"], levels


# The CPU pipeline's tests, called here (not imported: an imported test is reported, and
# skipped, under the CPU file's name).
@pytest.mark.parametrize("prompt", streaming_tests.PROMPTS)
def test_stream_equals_whole_equals_full_decode(client, tokenizer, prompt):
    streaming_tests.test_stream_equals_whole_equals_full_decode(client, tokenizer, prompt)


def test_answers_do_contain_multibyte_text(client):
    streaming_tests.test_answers_do_contain_multibyte_text(client)


def test_prompt_is_not_echoed_unless_asked(client):
    streaming_tests.test_prompt_is_not_echoed_unless_asked(client)


def test_sixteen_concurrent_streams(server, tokenizer):
    concurrency_tests.test_sixteen_concurrent_streams(server, tokenizer)


GPU_CASES = [c for c in cpu_bad_requests.CASES if c[1] != "bad_words"]  # TensorRT-LLM has bad words


@pytest.mark.parametrize("values,field,message", GPU_CASES)
def test_bad_request_gets_invalid_arg(server, values, field, message):
    _, error = cpu_bad_requests.raw_request(server.settings.grpc_url, **values)
    assert error is not None and "[INVALID_ARG]" in error.message() and f"'{field}'" in error.message(), error
    assert message in error.message()


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
def test_the_engine_stops_within_a_second_of_the_client_leaving(server, model):
    """Cancellation on the real backend: the relays record llm_generated_tokens_total in front
    of TensorRT-LLM, and it stops growing within a second of the client leaving."""
    cancellation_tests.assert_engine_stops_within_a_second(server, model)


@pytest.fixture(scope="module")
def overload_server(gpu_engine, tmp_path_factory):
    """The same engine served with a queue of one request in front of the executor."""
    import dataclasses
    import json

    from build_engines.repository import render_repository
    from contract.build_record import BuildRecord

    engine = tmp_path_factory.mktemp("overload") / "engine"
    engine.mkdir()
    for item in gpu_engine.iterdir():
        if item.name != "build.json":
            (engine / item.name).symlink_to(item)
    record = BuildRecord.read(gpu_engine)
    spec = json.loads(json.dumps(record.spec))
    spec["trtllm"]["serving"]["max_queue_size"] = 1
    dataclasses.replace(record, spec=spec).write(engine)
    repository = tmp_path_factory.mktemp("overload") / "repository"
    render_repository(engine, repository)
    settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("overload-logs") / "server.log")
    yield from _gpu_up(settings)


def test_overload_is_refused_retry_later(overload_server):
    """More requests than the batch (16) and the queue (1) at once: the surplus gets
    UNAVAILABLE 'retry later' (TensorRT-LLM's or Triton's queue bound, classified by the relay)
    and the server keeps serving."""
    from concurrent.futures import ThreadPoolExecutor

    from client.errors import ServerUnavailable

    prompt = [ChatMessage("user", "Write a very long story about the history of bread.")]
    sampling = SamplingParams(max_tokens=400, min_tokens=400, temperature=0.0)
    with LlmClient(overload_server.settings.grpc_url) as c, ThreadPoolExecutor(40) as pool:
        futures = [pool.submit(c.generate, prompt, sampling) for _ in range(40)]
        outcomes = []
        for f in futures:
            try:
                f.result(timeout=600)
                outcomes.append("ok")
            except ServerUnavailable as e:
                assert "retry later" in str(e)
                outcomes.append("refused")
    assert "refused" in outcomes and "ok" in outcomes
    assert overload_server.is_ready()


def test_answers_the_capital_question(client):
    result = client.generate([ChatMessage("user", "What is the capital of France?")],
                             SamplingParams(max_tokens=32, temperature=0.0))
    assert "Paris" in result.text and result.finish_reason == "stop"


def test_bad_words_work_on_the_gpu(client):
    prompt = [ChatMessage("user", "What is the capital of France?")]
    result = client.generate(prompt, SamplingParams(max_tokens=32, temperature=0.0, bad_words=("Paris",)))
    assert "Paris" not in result.text


def test_client_cancel_reaches_tensorrt_llm(server):
    """The relay test of the CPU wiring, now against the C++ backend: cancelling a relayed
    stream stops the TensorRT-LLM request (TensorRT-LLM's stop request, by the same request id):
    the cancelled request ends in well under half the time the whole one takes."""
    full = relay_tests.full_generation_seconds(server.settings.grpc_url)
    relay_tests.test_client_cancel_stops_the_engine_request(server, limit_s=full / 2)


def test_bls_gives_the_ensemble_results(server, client):
    with LlmClient(server.settings.grpc_url, model=names.LLM_BLS) as bls:
        bls_tests.test_same_tokens_and_text_as_the_ensemble(bls, client)
        bls_tests.test_non_streaming_and_stop_strings(bls, client)


def test_relay_echoes_detokenize_params(server):
    relay_tests.test_relay_echoes_detokenize_params_with_every_response(server)


def test_log_probs_agree_with_hf_fp32_on_tensorrt_llm(server, default_checkpoint):
    """Issue 12 on the C++ backend: return_log_probs -> output_log_probs (the relay keeps each
    streamed response's own window), against the float32 checkpoint, fp16 engine."""
    from tests.integration import test_generation_features as features_tests

    features_tests.test_logprobs_agree_with_hf_fp32(server, default_checkpoint)


def test_guided_decoding_and_n_samples(server, tmp_path):
    """Guided decoding by the executor's xgrammar decoder (rendered by default) and n samples
    per prompt, through the gRPC client and the OpenAI front."""
    from tests.integration import test_generation_features as features_tests

    with running_front(server.settings.grpc_url, tmp_path) as base:
        oai_client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        features_tests.check_guided_decoding(server.settings.grpc_url, oai_client)
        features_tests.check_n_samples(server.settings.grpc_url, oai_client)


def test_lora_adapters_built_into_the_engine(default_checkpoint, tmp_path_factory):
    """Issue 12's LoRA on the C++ backend: the default model built at fp16 with the two test
    adapters (`--lora-dir`: LoRA plugin, hf_lora_convert.py into <engine>/lora, prefetched by
    the backend), served with `serving gpu-up`; the same checks as on the stand-in (each
    adapter follows PEFT's float32 answers and changes the base model's, the OpenAI front
    selects them, an uncached task fails with upstream's text)."""
    import dataclasses

    from build_engines.cli_options import make_spec
    from build_engines.repository import render_repository
    from build_engines.trtllm.build import build_trtllm_engine, engine_is_built
    from build_engines.trtllm.lora import lora_options
    from contract.build_record import BuildRecord
    from tests.integration import test_lora as lora_tests

    lora_dir = lora_tests.make_adapters(default_checkpoint, tmp_path_factory.mktemp("adapters"))
    spec = make_spec(default_checkpoint, backend="tensorrt_llm", precision="fp16", max_batch_size=16, max_input_len=1024,
                     max_seq_len=2048, max_num_tokens=1024, default_max_tokens=256)
    spec = dataclasses.replace(spec, trtllm=dataclasses.replace(spec.trtllm, lora=lora_options(lora_dir)))
    engine_dir = ROOT / "build" / "engines" / "SmolLM2-135M-Instruct-tensorrt_llm-fp16-tp1-pp1-lora"
    if not (engine_is_built(engine_dir) and BuildRecord.read(engine_dir).spec == spec.to_dict()):
        build_trtllm_engine(spec, engine_dir)
    repository = tmp_path_factory.mktemp("gpu-lora") / "repository"
    render_repository(engine_dir, repository, lora_dir=lora_dir)
    settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("gpu-lora-logs") / "server.log")
    served = _gpu_up(settings)
    server = next(served)
    try:
        lora_tests.check_engine_flow_adapters(server.settings.grpc_url,
                                              lora_tests.peft_references(default_checkpoint, lora_dir), None,
                                              tmp_path_factory.mktemp("front"))
    finally:
        next(served, None)  # _gpu_up's teardown: the server terminated


def test_draft_target_speculative_decoding(default_checkpoint, tmp_path_factory):
    """Issue 11's draft-target on the C++ backend: the default model at fp16 as the target
    (--speculative_decoding_mode draft_tokens_external) and its first 2 layers as the draft
    (<engine>/draft, tensorrt_llm_draft), served with `serving gpu-up`; the stand-in layout's
    checks: greedy answers follow plain decoding, the draft counts, NVIDIA's refusals, and a
    client that leaves stops the loop and both engines."""
    import dataclasses

    from build_engines.cli_options import make_spec
    from build_engines.repository import render_repository
    from build_engines.trtllm.build import build_trtllm_engine, engine_is_built
    from build_engines.trtllm.options import DraftTargetOptions
    from build_engines.trtllm.options import SpeculativeDecoding
    from contract.build_record import BuildRecord
    from tests.integration import test_draft_target as draft_tests
    from tests.integration.test_draft_model import truncated_checkpoint

    draft = truncated_checkpoint(default_checkpoint, 2, tmp_path_factory.mktemp("draft") / "checkpoint")
    spec = make_spec(default_checkpoint, backend="tensorrt_llm", precision="fp16", max_batch_size=16, max_input_len=1024,
                     max_seq_len=2048, max_num_tokens=1024, default_max_tokens=256)
    spec = dataclasses.replace(spec, trtllm=dataclasses.replace(
        spec.trtllm, speculative_decoding=SpeculativeDecoding.DRAFT_TOKENS_EXTERNAL,
        draft_target=DraftTargetOptions(str(draft), draft_tests.MAX_DRAFT_LEN)))
    engine_dir = ROOT / "build" / "engines" / "SmolLM2-135M-Instruct-tensorrt_llm-fp16-tp1-pp1-draft-target"
    if not (engine_is_built(engine_dir) and BuildRecord.read(engine_dir).spec == spec.to_dict()):
        build_trtllm_engine(spec, engine_dir)
    repository = tmp_path_factory.mktemp("gpu-draft-target") / "repository"
    render_repository(engine_dir, repository)
    settings = ServerSettings.on_free_ports(repository, tmp_path_factory.mktemp("gpu-dt-logs") / "server.log")
    served = _gpu_up(settings)
    server = next(served)
    try:
        draft_tests.check_greedy_answers(server, same_tokens=16)
        draft_tests.test_stop_strings_and_short_answers_end_the_loop_as_plain_decoding_ends(server)
        for kwargs, message in draft_tests.REFUSALS:
            draft_tests.test_what_the_loop_cannot_serve_is_refused_and_the_server_keeps_serving(server, kwargs, message)
        draft_tests.test_a_client_that_leaves_stops_the_draft_loop_and_both_engines(server)
    finally:
        next(served, None)
