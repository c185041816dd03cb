"""The GPU repository layout on a real Triton 2.51 server, with `tensorrt_llm` served by the
stand-in for the C++ backend (TensorRT-LLM 1.1.0 semantics) over the CPU engine: the
ensemble's tokens, NVIDIA's tensor contract, `stop` by request id, client cancellation, the
effective max input length and the queue bound, each with upstream's texts."""

from __future__ import annotations

import json
import queue
import time
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from build_engines.render import read_config
from build_engines.trtllm.repository import tensorrt_llm_config
from build_engines.trtllm.options import TrtLlmServing
from client import ChatMessage, LlmClient, SamplingParams
from contract import names
from serving.prometheus import scrape, value
from standins.trtllm.repository import render_standin_repository, standin_spec

pytestmark = [pytest.mark.server, pytest.mark.slow]

MAX_ACTIVE = 2  # the test engine's max_batch_size: two requests fill the batch
MAX_QUEUE = 1
SERVING = TrtLlmServing(enable_chunked_context=False, max_queue_size=MAX_QUEUE)  # max input: min(2047, 512)
MAX_INPUT = 512
PROMPTS = [[ChatMessage("user", text)] for text in
           ("What is the capital of France?", "Write a haiku about the sea.", "Tell me a story about a brave knight.")]
GREEDY = SamplingParams(max_tokens=48, temperature=0.0)
LONG = 1500  # tokens: far more than any test waits for


@pytest.fixture(scope="module")
def standin_engine(default_engine, tmp_path_factory):
    """The default CPU engine with max_batch_size 2 (its files linked, build.json rewritten)."""
    engine = tmp_path_factory.mktemp("standin") / "engine"
    engine.mkdir()
    for item in default_engine.iterdir():
        if item.name != "build.json":
            (engine / item.name).symlink_to(item)
    record = json.loads((default_engine / "build.json").read_text())
    record["spec"]["limits"]["max_batch_size"] = MAX_ACTIVE
    (engine / "build.json").write_text(json.dumps(record))
    return engine


@pytest.fixture(scope="module")
def standin_server(standin_engine, tmp_path_factory, serve):
    repository = tmp_path_factory.mktemp("standin-repository") / "repository"
    render_standin_repository(standin_engine, repository, SERVING)
    return serve(repository)


@pytest.fixture(scope="module")
def standin_client(standin_server):
    with LlmClient(standin_server.settings.grpc_url) as c:
        yield c


class EngineStream:
    """One gRPC stream to `tensorrt_llm` with NVIDIA's tensor contract."""

    def __init__(self, server):
        self.responses: queue.Queue = queue.Queue()
        self.client = grpcclient.InferenceServerClient(server.settings.grpc_url)
        self.client.start_stream(callback=lambda result, error: self.responses.put((result, error)))

    def send(self, request_id="", **arrays):
        inputs = []
        for name, array in arrays.items():
            array = np.asarray(array)
            wire = {np.dtype(np.bool_): "BOOL", np.dtype(np.float32): "FP32"}.get(array.dtype, "INT32")
            tensor = grpcclient.InferInput(name, list(array.shape), wire)
            tensor.set_data_from_numpy(array if wire != "INT32" else array.astype(np.int32))
            inputs.append(tensor)
        self.client.async_stream_infer(names.TRTLLM_ENGINE, inputs, request_id=request_id,
                                       enable_empty_final_response=True)

    def next(self, timeout_s=60.0):
        """(outputs, final, error message)"""
        result, error = self.responses.get(timeout=timeout_s)
        if error is not None:
            return {}, True, error.message()
        response = result.get_response()
        outputs = {o.name: result.as_numpy(o.name) for o in response.outputs}
        return outputs, response.parameters["triton_final_response"].bool_param, None

    def until_final(self, timeout_s=120.0):
        got = []
        while True:
            outputs, final, error = self.next(timeout_s)
            got.append((outputs, error))
            if final:
                return got

    def close(self, cancel=False):
        self.client.stop_stream(cancel_requests=cancel)
        self.client.close()


def engine_request(prompt_len=5, tokens=8, **extra):
    return dict(input_ids=np.arange(100, 100 + prompt_len)[None], input_lengths=[[prompt_len]],
                request_output_len=[[tokens]], **extra)


def stop(server, request_id):
    """A stop request for `request_id`; returns its responses."""
    s = EngineStream(server)
    try:
        s.send(request_id, **engine_request(1, 1), stop=np.array([[True]]))
        return s.until_final(30)
    finally:
        s.close()


def active(server):
    return value(scrape(server.settings.metrics_url), "nv_trt_llm_request_metrics", request_type="active")


def wait_for(predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_the_stand_in_serves_the_gpu_config(standin_server, standin_engine):
    served = read_config(standin_server.settings.repository / names.TRTLLM_ENGINE / "config.pbtxt")
    gpu = tensorrt_llm_config(standin_engine.resolve(), standin_spec(standin_engine.resolve(), SERVING))
    served.backend = gpu.backend
    assert served == gpu


def test_greedy_tokens_through_the_ensemble_equal_the_cpu_pipeline(standin_client, client, tokenizer):
    for prompt in PROMPTS:
        chunks = list(standin_client.stream(prompt, GREEDY))
        direct = client.generate(prompt, GREEDY)
        ids = list(direct.token_ids)
        if direct.finish_reason == "stop":
            ids = ids[:-1]  # the CPU engine returns the end id; TensorRT-LLM never does
        assert [t for c in chunks for t in c.token_ids] == ids, prompt
        assert "".join(c.text for c in chunks) == direct.text
        whole = standin_client.generate(prompt, GREEDY, stream=False)
        assert whole.text == direct.text and whole.finish_reason == direct.finish_reason


def test_streamed_finish_reason_at_the_end_id(standin_client, client):
    chunks = list(standin_client.stream(PROMPTS[0], GREEDY))
    assert client.generate(PROMPTS[0], GREEDY).finish_reason == "stop"
    assert chunks[-1].finish_reason == "stop"


def test_streamed_log_probs_one_per_token(standin_client):
    sampling = SamplingParams(max_tokens=16, temperature=0.0, return_log_probs=True)
    result = standin_client.generate(PROMPTS[1], sampling)
    assert len(result.log_probs) == len(result.token_ids)


def test_nvidia_tensor_contract_direct_to_tensorrt_llm(standin_server):
    s = EngineStream(standin_server)
    try:
        s.send(uuid.uuid4().hex, **engine_request(5, 6), streaming=np.array([[True]]))
        streamed = s.until_final()
        tokens = []
        for outputs, error in streamed:
            assert error is None and set(outputs) <= {"output_ids", "sequence_length"}  # no log probs unless asked
            if outputs:
                k = outputs["output_ids"].shape[-1]
                assert outputs["output_ids"].shape == (1, 1, k) and outputs["sequence_length"].tolist() == [[k]]
                tokens += outputs["output_ids"].reshape(-1).tolist()
        assert len(tokens) == 6  # no end_id sent: nothing stops it early
        s.send(uuid.uuid4().hex, **engine_request(5, 4), exclude_input_in_output=np.array([[False]]),
               return_log_probs=np.array([[True]]))
        ((outputs, error),) = s.until_final()
        assert outputs["output_ids"].shape == (1, 1, 9) and outputs["output_ids"][0, 0, :5].tolist() == list(range(100, 105))
        assert outputs["output_log_probs"].shape == (1, 1, 4) and outputs["cum_log_probs"].shape == (1, 1)
    finally:
        s.close()


def test_stop_by_request_id_ends_a_running_streamed_request(standin_server):
    request_id = f"victim-{uuid.uuid4().hex}"
    s = EngineStream(standin_server)
    try:
        s.send(request_id, **engine_request(5, LONG), streaming=np.array([[True]]))
        for _ in range(3):
            assert s.next()[2] is None
        replies = stop(standin_server, request_id)
        assert [(o, e) for o, e in replies] == [({}, None)]  # one final response, no tensors
        t0 = time.monotonic()
        rest = s.until_final(30)
        assert time.monotonic() - t0 < 5 and all(e is None for _, e in rest)  # ended normally, not an error
        assert sum(o["output_ids"].shape[-1] for o, _ in rest if o) < 200
        assert stop(standin_server, "") == [({}, "Trying to stop a request but request ID is not provided")]
    finally:
        s.close()


def test_client_cancellation_frees_the_engine(standin_server):
    assert wait_for(lambda: active(standin_server) == 0, 10)
    s = EngineStream(standin_server)
    s.send(uuid.uuid4().hex, **engine_request(5, LONG), streaming=np.array([[True]]))
    for _ in range(3):
        assert s.next()[2] is None
    assert wait_for(lambda: active(standin_server) == 1, 2)
    s.close(cancel=True)
    assert wait_for(lambda: active(standin_server) == 0, 3)  # polled every cancellation_check_period_ms


def test_prompt_over_the_effective_max_input_len_is_refused(standin_server):
    s = EngineStream(standin_server)
    try:
        s.send(uuid.uuid4().hex, **engine_request(MAX_INPUT + 1, 4))
        ((_, error),) = s.until_final()
        assert error.startswith("Executor failed process requestId ")
        assert (f"Encountered an error when fetching new request: Prompt length ({MAX_INPUT + 1}) exceeds maximum "
                f"input length ({MAX_INPUT}).") in error
    finally:
        s.close()


def test_queue_bound_refuses_with_upstreams_text(standin_server):
    """Two requests fill the batch, one waits in the executor's queue, the next is refused at
    once.  Each reaches the model alone: requests that arrive together wait in Triton's own
    scheduler queue, which enforces the same max_queue_size with Triton's text."""
    assert wait_for(lambda: active(standin_server) == 0, 10)
    s = EngineStream(standin_server)
    ids = [f"q{i}-{uuid.uuid4().hex}" for i in range(MAX_ACTIVE + MAX_QUEUE + 1)]
    try:
        for n, request_id in enumerate(ids):
            s.send(request_id, **engine_request(5, LONG), streaming=np.array([[True]]))
            if n + 1 == MAX_ACTIVE:
                assert wait_for(lambda: active(standin_server) == MAX_ACTIVE, 10)
            time.sleep(1.0)  # one request per execute()
        errors = []
        deadline = time.monotonic() + 30
        while not errors and time.monotonic() < deadline:
            error = s.next(30)[2]
            errors += [error] if error else []
        assert errors == [f"Maximum queue size of {MAX_QUEUE} has been reached, please try again later"]
        assert active(standin_server) == MAX_ACTIVE
    finally:
        for request_id in ids:
            stop(standin_server, request_id)
        s.close()
    assert wait_for(lambda: active(standin_server) == 0, 10)


def test_backend_metrics_have_upstreams_names_and_labels(standin_server):
    samples = scrape(standin_server.settings.metrics_url)
    families = {s.name for s in samples}
    assert {"nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics", "nv_trt_llm_general_metrics"} <= families
    labels = {dict(s.labels)["request_type"] for s in samples if s.name == "nv_trt_llm_request_metrics"}
    assert labels == {"active", "max", "scheduled", "context", "waiting"}
    assert value(samples, "nv_trt_llm_request_metrics", request_type="max", model=names.TRTLLM_ENGINE, version="1") == MAX_ACTIVE
    assert value(samples, "nv_trt_llm_kv_cache_block_metrics", kv_cache_block_type="tokens_per") == 32
