"""NVIDIA's `decoupled_mode: false` deployment: one response per request, so the first thing
most Triton users write, a unary infer() over gRPC or HTTP, works against the ensemble and the
BLS; streaming and batched requests are refused in TensorRT-LLM's words."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from build_engines.render import read_config
from build_engines.repository import render_repository
from client import SamplingParams
from contract import names

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROMPT = "What is machine learning?"


@pytest.fixture(scope="module")
def unary_server(default_engine, tmp_path_factory, serve):
    repository = tmp_path_factory.mktemp("non_decoupled") / "repository"
    render_repository(default_engine, repository, decoupled=False)
    return serve(repository)


def _inputs(prompt=PROMPT, stream=False, rows=1):
    def tensor(name, array, dtype):
        t = grpcclient.InferInput(name, list(array.shape), dtype)
        t.set_data_from_numpy(array)
        return t

    return [tensor("text_input", np.array([[prompt.encode()]] * rows, dtype=object), "BYTES"),
            tensor("max_tokens", np.full((rows, 1), 16, dtype=np.int32), "INT32"),
            tensor("stream", np.full((rows, 1), stream, dtype=bool), "BOOL"),
            tensor("beam_width", np.ones((rows, 1), dtype=np.int32), "INT32")]


def test_the_configs_are_not_decoupled(unary_server):
    repo = unary_server.settings.repository
    for model in (names.ENSEMBLE, names.LLM_BLS, names.ENGINE_RELAY):
        assert not read_config(repo / model / "config.pbtxt").model_transaction_policy.decoupled, model
    assert read_config(repo / names.OPENVINO_ENGINE / "config.pbtxt").model_transaction_policy.decoupled


@pytest.mark.parametrize("model", [names.ENSEMBLE, names.LLM_BLS])
def test_unary_grpc_infer_answers_like_the_streaming_deployment(unary_server, client, model):
    result = grpcclient.InferenceServerClient(unary_server.settings.grpc_url).infer(model, _inputs())
    text = result.as_numpy("text_output")[0].decode("utf-8")  # how NVIDIA's clients read it
    assert text == client.generate(PROMPT, SamplingParams(max_tokens=16)).text  # greedy: the same answer
    assert result.as_numpy("batch_index").tolist() == [[0]]


def test_unary_http_infer(unary_server):
    body = {"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1, 1], "data": [PROMPT]},
                       {"name": "max_tokens", "datatype": "INT32", "shape": [1, 1], "data": [8]}]}
    request = urllib.request.Request(f"{unary_server.settings.http_url}/v2/models/ensemble/infer",
                                     data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        outputs = {o["name"]: o for o in json.loads(response.read())["outputs"]}
    assert outputs["text_output"]["shape"] == [1] and outputs["text_output"]["data"][0].strip()


@pytest.mark.parametrize("inputs,message", [
    (dict(stream=True), "Streaming is only supported if model is deployed using decoupled mode."),
    (dict(rows=3), "Batch size > 1 requires the tensorrt_llm backend to be using decoupled transaction policy"),
])
def test_what_one_response_cannot_carry_is_refused(unary_server, inputs, message):
    client = grpcclient.InferenceServerClient(unary_server.settings.grpc_url)
    for model in (names.ENSEMBLE, names.LLM_BLS):
        with pytest.raises(InferenceServerException, match="INVALID_ARG") as e:
            client.infer(model, _inputs(**inputs))
        assert message in str(e.value)
    assert unary_server.is_ready()
