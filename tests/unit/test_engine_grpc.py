"""The relays' gRPC transport without a server: where a stub finds its own server's gRPC
endpoint, what refuses to work, and the request/response encoding round trip."""

import ast
from pathlib import Path

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from model_repository.triton.engine_grpc import (RelayConfigError, decode, grpc_target, infer_request, own_server_target,
                                                 rpc_failure)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, target", [
    (["tritonserver", "--model-repository=/r"], "127.0.0.1:8001"),
    (["tritonserver", "--grpc-port=9101", "--grpc-address=127.0.0.1"], "127.0.0.1:9101"),
    (["tritonserver", "--grpc-port", "9102", "--grpc-address", "0.0.0.0"], "127.0.0.1:9102"),
    (["tritonserver", "--grpc-address=10.1.2.3", "--grpc-port=7"], "10.1.2.3:7"),
    (["tritonserver", "--allow-grpc=true", "--grpc-use-ssl=false"], "127.0.0.1:8001"),
    (["tritonserver", "--grpc-restricted-protocol=model-repository,trace:k=v"], "127.0.0.1:8001"),  # the chart's
])
def test_the_servers_own_grpc_endpoint_from_its_command_line(args, target):
    assert grpc_target(args) == target


@pytest.mark.parametrize("flag, says", [("--allow-grpc=false", "--allow-grpc=false"),
                                        ("--grpc-use-ssl=true", "--grpc-use-ssl"),
                                        ("--grpc-restricted-protocol=inference,trace:key=v", "restricts its inference")])
def test_a_server_the_relay_cannot_reach_is_refused_naming_the_flag(flag, says):
    with pytest.raises(RelayConfigError, match=says):
        grpc_target(["tritonserver", flag])


def test_own_server_is_the_parent_process(tmp_path, monkeypatch):
    import os

    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cmdline").write_bytes(b"tritonserver\0--grpc-port=9555\0--http-port=1\0")
    monkeypatch.setattr(os, "getppid", lambda: 4242)
    assert own_server_target(tmp_path) == "127.0.0.1:9555"


def test_request_encoding_round_trips_every_dtype_the_engine_contract_uses():
    arrays = {"input_ids": np.array([[1, 2, 3]], np.int32), "request_output_len": np.array([[8]], np.int32),
              "temperature": np.array([[0.5]], np.float32), "streaming": np.array([[True]]),
              "random_seed": np.array([[7]], np.uint64), "stop_words": np.array([[b"a", "é".encode()]], object)}
    request = infer_request("tensorrt_llm", arrays, ("output_ids",), "req-1")
    assert request.model_name == "tensorrt_llm" and request.id == "req-1"
    assert [o.name for o in request.outputs] == ["output_ids"]
    # the server's view of the request is what a response carrying the same tensors decodes to
    response = service_pb2.ModelStreamInferResponse()
    for tensor, raw in zip(request.inputs, request.raw_input_contents):
        response.infer_response.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        response.infer_response.raw_output_contents.append(raw)
    reply = decode(response)
    assert reply.error is None and set(reply.outputs) == set(arrays)
    for name, value in arrays.items():
        assert reply.outputs[name].dtype == value.dtype or value.dtype == object
        assert reply.outputs[name].tolist() == value.tolist()


def test_an_error_message_is_the_reply():
    reply = decode(service_pb2.ModelStreamInferResponse(error_message="[INVALID_ARG] bad"))
    assert reply.error == "[INVALID_ARG] bad" and reply.outputs == {}


def test_a_failed_call_is_unavailable_in_our_code_first_form():
    import grpc

    class Failed(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.UNAVAILABLE

        def details(self):
            return "Socket closed"

    message = rpc_failure(Failed())
    assert message.startswith("[UNAVAILABLE]") and "Socket closed" in message


def decoupled_bls_calls(source: str) -> list[int]:
    """Lines of `source` that make a BLS call able to enter the Python backend's deadlock: a
    decoupled `exec` (its response iterator) or any `async_exec` (the same iterator on a thread)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            decoupled = any(k.arg == "decoupled" and not (isinstance(k.value, ast.Constant) and not k.value.value)
                            for k in node.keywords)
            if node.func.attr == "async_exec" or (node.func.attr == "exec" and decoupled):
                lines.append(node.lineno)
    return sorted(lines)


def test_the_finder_sees_a_decoupled_or_async_bls_call():
    assert decoupled_bls_calls("r.exec(decoupled=True)\nr.exec()\nr.exec(decoupled=False)\n") == [1]
    assert decoupled_bls_calls("await r.async_exec()\nr.exec(decoupled=flag)\n") == [1, 2]


def test_no_model_makes_a_decoupled_bls_call():
    """The relays stream over gRPC (engine_grpc.py); a decoupled BLS call anywhere in the models'
    code would bring back the lock-order inversion docs/robustness.md describes."""
    found = {str(path.relative_to(ROOT)): lines for path in sorted((ROOT / "model_repository").rglob("*.py"))
             if (lines := decoupled_bls_calls(path.read_text()))}
    assert not found, found
