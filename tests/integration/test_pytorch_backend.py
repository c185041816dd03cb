"""The PyTorch-backend layout (ensemble -> tensorrt_llm_pytorch, tensorrt_llm_bls ->
tensorrt_llm_pytorch) on a real Triton 2.51 server, with the stand-in LLM API generating by the
CPU engine: the same tokens as the CPU pipeline, stops, the engine contract spoken directly,
`stop` by request id, refusals by name, the queue bound and the first-token timeout, metrics.

The behaviour suites (streaming text, bad requests, cancellation, stress) run on this layout
too (tests/integration/conftest.py LAYOUTS)."""

from __future__ import annotations

import json
import queue
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from build_engines.render import read_config
from build_engines.repository import render_repository
from client import ChatMessage, LlmClient, SamplingParams
from client.errors import InvalidRequestError
from contract import metrics as m
from contract import names
from serving.prometheus import scrape, value
from standins.links import use_standin_llmapi

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPTS = ["What is the capital of France?", "Write a haiku about the sea.", "Tell me a story about a brave knight."]
GREEDY = SamplingParams(max_tokens=48, temperature=0.0)
LONG = SamplingParams(max_tokens=400, min_tokens=400, temperature=0.0)


# --- overload: a small engine (2 running, 1 waiting, 3 s to the first token) -----------------
# First in the module: its server starts before this module's clients open gRPC streams (a
# server forked while another thread is inside gRPC has been seen to abort at start).
MAX_BATCH, MAX_QUEUE, FIRST_TOKEN_TIMEOUT_S = 2, 1, 3.0


@pytest.fixture(scope="module")
def small_pytorch_server(pytorch_engine, default_engine, tmp_path_factory, serve):
    """The PyTorch build with max_batch_size 2, max_queue_size 1 and a 3 s first-token timeout
    (its model directory linked, build.json rewritten)."""
    engine = tmp_path_factory.mktemp("small-pytorch") / "engine"
    engine.mkdir()
    (engine / "model").symlink_to(pytorch_engine / "model")
    record = json.loads((pytorch_engine / "build.json").read_text())
    record["spec"]["limits"]["max_batch_size"] = MAX_BATCH
    record["spec"]["pytorch"]["serving"].update(max_queue_size=MAX_QUEUE, queue_timeout_s=FIRST_TOKEN_TIMEOUT_S)
    (engine / "build.json").write_text(json.dumps(record))
    repository = tmp_path_factory.mktemp("small-pytorch-repository") / "repository"
    render_repository(engine, repository)
    return serve(repository, use_standin_llmapi(repository, default_engine))


def test_beyond_the_queue_bound_requests_are_refused_retry_later(small_pytorch_server):
    """Two requests fill the LLM's batch, one waits; the next is refused at once, UNAVAILABLE;
    the waiting one gets no first token within 3 s and is failed UNAVAILABLE too."""
    outcomes: dict[int, str] = {}

    def run(i):
        with LlmClient(small_pytorch_server.settings.grpc_url) as c:
            try:
                c.generate(PROMPTS[2], LONG, timeout_s=60)
                outcomes[i] = "completed"
            except Exception as e:
                outcomes[i] = f"{type(e).__name__}: {e}"

    threads = []
    for i in range(MAX_BATCH + MAX_QUEUE + 1):
        threads.append(threading.Thread(target=run, args=(i,)))
        threads[-1].start()
        time.sleep(0.3)  # in order: the last one finds the engine full
    for t in threads:
        t.join(120)
    refused = [o for o in outcomes.values() if "retry later" in o]
    assert any("is full" in o for o in refused), outcomes
    assert any("no first token" in o for o in refused), outcomes
    assert list(outcomes.values()).count("completed") == MAX_BATCH, outcomes
    assert all(o.startswith("ServerUnavailable") for o in refused), outcomes


# --- the layout itself ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def pytorch_client(pytorch_server):
    with LlmClient(pytorch_server.settings.grpc_url) as c:
        yield c


def wait_for(predicate, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_the_layout_is_the_pytorch_one(pytorch_server, pytorch_engine):
    repository = pytorch_server.settings.repository
    ensemble = read_config(repository / names.ENSEMBLE / "config.pbtxt")
    assert [s.model_name for s in ensemble.ensemble_scheduling.step][1] == names.PYTORCH_ENGINE
    bls = read_config(repository / names.LLM_BLS / "config.pbtxt")
    assert bls.parameters["target_model"].string_value == names.PYTORCH_ENGINE
    engine = read_config(repository / names.PYTORCH_ENGINE / "config.pbtxt")
    assert engine.model_transaction_policy.decoupled
    assert engine.parameters["model_dir"].string_value == str(pytorch_engine / "model")
    assert json.loads((pytorch_engine / "build.json").read_text())["versions"]["tensorrt_llm"] == "1.2.1"


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
def test_greedy_tokens_equal_the_cpu_pipeline(pytorch_server, client, model):
    with LlmClient(pytorch_server.settings.grpc_url, model=model) as pytorch:
        for prompt in PROMPTS:
            messages = [ChatMessage("user", prompt)]
            ours, cpu = pytorch.generate(messages, GREEDY), client.generate(messages, GREEDY)
            assert ours.token_ids == cpu.token_ids
            assert (ours.text, ours.finish_reason) == (cpu.text, cpu.finish_reason)


@pytest.mark.parametrize("stop", [(" Paris",), (".",), ("capital of",)])
def test_stop_strings_end_the_answer_as_on_the_cpu_pipeline(pytorch_client, client, stop):
    messages = [ChatMessage("user", PROMPTS[0])]
    params = SamplingParams(max_tokens=48, temperature=0.0, stop=stop)
    ours, cpu = pytorch_client.generate(messages, params), client.generate(messages, params)
    assert (ours.text, ours.finish_reason) == (cpu.text, cpu.finish_reason)
    assert ours.finish_reason == "stop" and stop[0] not in ours.text
    streamed = list(pytorch_client.stream(messages, params))
    assert "".join(c.text for c in streamed) == ours.text and streamed[-1].finish_reason == "stop"


def test_log_probs_come_one_per_token(pytorch_client):
    chunks = list(pytorch_client.stream([ChatMessage("user", PROMPTS[0])],
                                        SamplingParams(max_tokens=8, temperature=0.0, return_log_probs=True)))
    tokens = [t for c in chunks for t in c.token_ids]
    log_probs = [lp for c in chunks for lp in c.log_probs]
    assert len(log_probs) == len(tokens) and all(lp <= 0.0 for lp in log_probs) and any(lp < 0 for lp in log_probs)


def test_bad_words_are_refused_naming_the_version_whose_sampler_ignores_them(pytorch_client, tokenizer):
    """TorchSampler at 1.2.1 accepts bad words and ignores them (sampling_support_1.2.1.json):
    refused by name, one token or several (tests/integration/test_sampling_refusals.py has the rest)."""
    word = "Paris is lovely"
    assert len(tokenizer.encode(word, add_special_tokens=False).ids) > 1
    for words in ((word,), (" Paris",)):
        with pytest.raises(InvalidRequestError, match="'bad_words'.*1.2.1"):
            pytorch_client.generate(PROMPTS[0], SamplingParams(max_tokens=4, bad_words=words))


class EngineStream:
    """One gRPC stream to tensorrt_llm_pytorch in the engine contract (NVIDIA's tensor names)."""

    def __init__(self, server):
        self.responses: queue.Queue = queue.Queue()
        self.client = grpcclient.InferenceServerClient(server.settings.grpc_url)
        self.client.start_stream(callback=lambda result, error: self.responses.put((result, error)))

    def send(self, request_id="", **arrays):
        inputs = []
        for name, array in arrays.items():
            array = np.asarray(array)
            wire = {np.dtype(np.bool_): "BOOL", np.dtype(object): "BYTES"}.get(array.dtype, "INT32")
            tensor = grpcclient.InferInput(name, list(array.shape), wire)
            tensor.set_data_from_numpy(array if wire != "INT32" else array.astype(np.int32))
            inputs.append(tensor)
        self.client.async_stream_infer(names.PYTORCH_ENGINE, inputs, request_id=request_id,
                                       enable_empty_final_response=True)

    def until_final(self, timeout_s=60.0):
        got = []
        while True:
            result, error = self.responses.get(timeout=timeout_s)
            if error is not None:
                return got + [({}, error.message())]
            response = result.get_response()
            got.append(({o.name: result.as_numpy(o.name) for o in response.outputs}, None))
            if response.parameters["triton_final_response"].bool_param:
                return got

    def close(self):
        self.client.stop_stream()
        self.client.close()


def engine_request(tokens=8, **extra):
    return dict(input_ids=np.arange(100, 105)[None], input_lengths=[[5]], request_output_len=[[tokens]],
                end_id=[[-1]], detokenize_params=np.array([[b'{"echo": 1}']], dtype=object), **extra)


def test_the_engine_contract_spoken_directly(pytorch_server):
    s = EngineStream(pytorch_server)
    try:
        s.send(**engine_request(6, streaming=np.array([[True]])))
        got = s.until_final()
    finally:
        s.close()
    assert all(error is None for _, error in got)
    ids = [t for outputs, _ in got if "output_ids" in outputs for t in outputs["output_ids"].reshape(-1)]
    assert len(ids) == 6  # end_id -1: no end id, max tokens
    assert all(o["detokenize_params"].reshape(-1)[0] == b'{"echo": 1}' for o, _ in got if o)
    assert all(o["batch_index"].reshape(-1)[0] == 0 for o, _ in got if o)


def test_stop_by_request_id_ends_a_running_streamed_request(pytorch_server):
    running, stopper = EngineStream(pytorch_server), EngineStream(pytorch_server)
    try:
        running.send("to-stop", **engine_request(1500, streaming=np.array([[True]])))
        first = running.responses.get(timeout=60)
        assert first[1] is None
        stopper.send("to-stop", **engine_request(1, stop=np.array([[True]])))
        answer = stopper.until_final(30)  # one empty final response (our contract, as the CPU engine's)
        assert all(error is None for _, error in answer)
        rest = running.until_final(10)  # ends with a final response, not an error (our contract)
        assert rest[-1][1] is None
        ids = [t for o, _ in rest if "output_ids" in o for t in o["output_ids"].reshape(-1)]
        assert len(ids) < 1000
    finally:
        running.close()
        stopper.close()


def test_metrics_include_the_kv_cache_usage(pytorch_server, pytorch_client):
    pytorch_client.generate(PROMPTS[0], GREEDY)
    text = scrape(pytorch_server.settings.metrics_url)
    assert wait_for(lambda: value(scrape(pytorch_server.settings.metrics_url), m.KV_CACHE_USAGE.name,
                                  model=names.PYTORCH_ENGINE) > 0, 5.0), text
    assert value(text, m.GENERATED_TOKENS.name, model=names.PYTORCH_ENGINE) > 0


def test_a_request_of_two_prompts_is_answered_prompt_by_prompt(pytorch_server, pytorch_client):
    """NVIDIA's batched requests ([n, 1] text_input): every prompt streams under its batch_index
    through one response sender (SharedChannel), with the tokens it gets alone."""
    prompts = [b"The capital of France is", b"Once upon a time"]
    tensors = [("text_input", np.array([[p] for p in prompts], dtype=object), "BYTES"),
               ("max_tokens", np.array([[12], [12]], dtype=np.int32), "INT32"),
               ("temperature", np.array([[0.0], [0.0]], dtype=np.float32), "FP32"),
               ("stream", np.array([[True], [True]]), "BOOL")]
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(pytorch_server.settings.grpc_url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    inputs = []
    for name, array, wire in tensors:
        inputs.append(grpcclient.InferInput(name, list(array.shape), wire))
        inputs[-1].set_data_from_numpy(array)
    client.async_stream_infer(names.ENSEMBLE, inputs, enable_empty_final_response=True)
    texts, finishes = {0: "", 1: ""}, {}
    while True:
        result, error = responses.get(timeout=60)
        assert error is None, error
        response = result.get_response()
        if response.outputs:
            row = int(result.as_numpy("batch_index").reshape(-1)[0])
            texts[row] += result.as_numpy("text_output").reshape(-1)[0].decode()
            finish = result.as_numpy("finish_reason").reshape(-1)[0].decode()
            if finish:
                finishes[row] = finish
        if response.parameters["triton_final_response"].bool_param:
            break
    client.stop_stream()
    assert set(finishes) == {0, 1}
    for row, prompt in enumerate(prompts):
        alone = pytorch_client.generate(prompt.decode(), SamplingParams(max_tokens=12, temperature=0.0))
        assert texts[row] == alone.text
