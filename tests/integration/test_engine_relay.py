"""The GPU wiring on CPU: preprocessing -> engine_relay -> postprocessing, with the relay
pointed at the CPU engine (which keeps TensorRT-LLM's engine contract, `stop` included)
instead of the C++ `tensorrt_llm` model.  A real Triton 2.51 server."""

from __future__ import annotations

import queue
import re
import time
import uuid

import pytest
import tritonclient.grpc as grpcclient

from build_engines.render import read_config
from client import ChatMessage, LlmClient, SamplingParams
from client.errors import InvalidRequestError
from contract import names
from contract.tensors import ENGINE_INPUTS, by_name
from model_repository.engine_step.engine_inputs import EngineInputs

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPTS = [[ChatMessage("user", text)] for text in
           ("What is the capital of France?", "Write a haiku about the sea.", "Tell me a story about a brave knight.")]
GREEDY = SamplingParams(max_tokens=48, temperature=0.0)
CANCEL_TOKENS = 2000


@pytest.fixture(scope="module")
def relay_client(relay_server):
    with LlmClient(relay_server.settings.grpc_url) as c:
        yield c


def test_ensemble_steps_through_the_relay(relay_server):
    ensemble = read_config(relay_server.settings.repository / names.ENSEMBLE / "config.pbtxt")
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == \
        [names.PREPROCESSING, names.ENGINE_RELAY, names.POSTPROCESSING]


def test_streamed_text_and_tokens_equal_the_plain_cpu_pipeline(relay_client, client):
    for prompt in PROMPTS:
        chunks = list(relay_client.stream(prompt, GREEDY))
        direct = client.generate(prompt, GREEDY)
        relayed_ids = [t for c in chunks for t in c.token_ids]
        assert relayed_ids == list(direct.token_ids), prompt
        assert "".join(c.text for c in chunks) == direct.text
        assert chunks[-1].finish_reason == direct.finish_reason
        assert len(chunks) > 3  # streamed, not one response


def test_non_streaming_request_through_the_relay(relay_client, client):
    relayed = relay_client.generate(PROMPTS[0], GREEDY, stream=False)
    assert relayed.text == client.generate(PROMPTS[0], GREEDY, stream=False).text


def test_engine_errors_pass_through_the_relay(relay_server, relay_client):
    # The CPU engine rejects bad words (OpenVINO GenAI has no such control): an engine error,
    # sent straight to the relay (through the ensemble, preprocessing refuses it first).
    inputs = _engine_request(4, bad_words_list=((9690,),))
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(relay_server.settings.grpc_url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        client.async_stream_infer(names.ENGINE_RELAY, inputs, enable_empty_final_response=True)
        result, error = responses.get(timeout=30)
    finally:
        client.stop_stream()
    assert error is not None and "'bad_words_list' asks for bad words" in str(error) and "[INVALID_ARG]" in str(error)
    # and the server is fine afterwards
    assert relay_client.generate("Hello", SamplingParams(max_tokens=4, temperature=0.0)).completion_tokens == 4


def _engine_request(n_tokens: int, **fields) -> list[grpcclient.InferInput]:
    specs = by_name(ENGINE_INPUTS)
    request = EngineInputs(input_ids=(1, 9690, 28, 2), input_lengths=4, request_output_len=n_tokens, end_id=-1,
                           streaming=True, detokenize_params='{"echo": "me"}', **fields)
    inputs = []
    for name, array in request.to_arrays().items():
        tensor = grpcclient.InferInput(name, list(array.shape), specs[name].dtype.wire_name)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def test_relay_echoes_detokenize_params_with_every_response(relay_server):
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(relay_server.settings.grpc_url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        client.async_stream_infer(names.ENGINE_RELAY, _engine_request(5), enable_empty_final_response=True)
        seen = []
        while True:
            result, error = responses.get(timeout=60)
            assert error is None, f"{error.status()}: {error.message()}"
            if result.get_response().parameters["triton_final_response"].bool_param:
                break
            assert result.as_numpy("detokenize_params").reshape(-1)[0] == b'{"echo": "me"}'
            seen.extend(result.as_numpy("output_ids").reshape(-1).tolist())
        assert len(seen) == 5
    finally:
        client.stop_stream()
        client.close()


def full_generation_seconds(url: str, n_tokens: int = CANCEL_TOKENS) -> float:
    """How long the engine takes for the whole request (the yardstick for cancellation)."""
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    started = time.monotonic()
    try:
        client.async_stream_infer(names.ENGINE_RELAY, _engine_request(n_tokens), enable_empty_final_response=True)
        while not responses.get(timeout=300)[0].get_response().parameters["triton_final_response"].bool_param:
            pass
        return time.monotonic() - started
    finally:
        client.stop_stream()
        client.close()


def test_client_cancel_stops_the_engine_request(relay_server, limit_s: float = 10.0):
    """Cancelling the relay's stream cancels the engine request (here through the stop
    protocol: Triton 2.51 cannot cancel a BLS stream); the relay sees the engine's stream end
    long before the 2000 tokens it asked for (~20 s on the CPU engine)."""
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(relay_server.settings.grpc_url)
    client.start_stream(callback=lambda result, error: responses.put((result, error)))
    request_id = uuid.uuid4().hex
    client.async_stream_infer(names.ENGINE_RELAY, _engine_request(CANCEL_TOKENS), request_id=request_id)
    for _ in range(3):
        result, error = responses.get(timeout=60)
        assert error is None
    cancelled_at = time.monotonic()
    client.stop_stream(cancel_requests=True)
    client.close()
    assert_cancelled_quickly(relay_server, names.ENGINE_RELAY, cancelled_at, limit_s)


def assert_cancelled_quickly(server, model: str, cancelled_at: float, limit_s: float) -> None:
    """The model logs '<model>: <id> cancelled after <s>s' when the engine's stream of a
    cancelled request has ended: it must come, and well before the whole request would."""
    pattern = re.compile(model + r": \S+ cancelled after ([0-9.]+)s")
    while time.monotonic() - cancelled_at < 30:
        found = pattern.findall(server.settings.log_file.read_text(errors="replace"))
        if found:
            assert float(found[-1]) < limit_s
            return
        time.sleep(0.2)
    pytest.fail(f"{model} never reported the cancelled request:\n" + server.log_tail())
