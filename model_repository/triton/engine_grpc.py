"""How the relays (engine_relay, tensorrt_llm_bls) stream a request to the engine model: over
their own server's gRPC endpoint (KServe `ModelStreamInfer`), not as a decoupled BLS call.

Why not BLS.  Triton's Python backend deadlocks a stub in which one thread starts a decoupled
BLS stream while another reads one (python_backend src/pb_stub.cc and
src/pb_response_iterator.cc, the same at r24.10 = Triton 2.51, r25.12 and r26.07):
  - the `exec` binding calls `Stub::GetResponseIterator`, which locks
    `response_iterator_map_mu_`, with the GIL held;
  - the parent-to-stub thread holds that mutex while it enqueues a stream's response
    (`Stub::ProcessBLSResponseDecoupled` -> `ResponseIterator::EnqueueResponse`, which locks
    the stream's `mu_`);
  - `ResponseIterator::Next()` waits with `mu_` held and its `gil_scoped_release` inside the
    wait loop, so a reader wakes holding `mu_` and then takes the GIL back.
A relay reads many streams at once, one per request, and must start new ones meanwhile: the
cycle is reachable however the threads are arranged.  `async_exec` does not avoid it: it runs
the same `exec` path on the event loop's default executor (a thread) and returns the same
blocking ResponseIterator (r24.10 / r25.12 / r26.07 alike).  One stream per stub (NVIDIA's
`tensorrt_llm_bls`: `execute()` reads one request's stream at a time per instance) costs a
stub process per concurrent stream and leaves a `stop` request queued behind busy instances.

Over gRPC a relay thread blocks in gRPC's own wait, with the GIL released and no lock of the
Python backend held.  Triton 2.51's gRPC frontend has a race between a stream's cancellation
and its completion (server issues #7368 and #8034; fixed by PRs #7840 and #8078, in r25.12
and later): a relay never cancels a call.  It half-closes its side after its one request,
stops an engine request with TensorRT-LLM's stop protocol (a request with the same id and
`stop` true, itself a call that completes), and reads every call to its end.

Nothing here imports Triton's Python backend: tests drive it against a real server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import grpc
import numpy as np
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import deserialize_bytes_tensor, np_to_triton_dtype, serialize_byte_tensor, triton_to_np_dtype

DEFAULT_GRPC_PORT = 8001  # tritonserver's --grpc-port default
# Engine outputs may be whole logits: no message-size limit on the loopback channel.
CHANNEL_OPTIONS = (("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1))
STOP_TIMEOUT_S = 30.0
_FALSE = {"false", "0", "off", "no"}
_ANY_ADDRESS = {"", "0.0.0.0", "::", "[::]"}
# How an error reply of rpc_failure begins (the Dynamo worker tells a replica that is gone by it).
CALL_FAILED = "[UNAVAILABLE] the server's engine call failed"


class RelayConfigError(ValueError):
    """The server runs with options its relays cannot work with."""


def grpc_target(server_args: Sequence[str]) -> str:
    """host:port of the gRPC endpoint that a tritonserver started with `server_args` (its argv)
    listens on, as a loopback client reaches it."""
    options: dict[str, str] = {}
    restricted: list[str] = []  # --grpc-restricted-protocol may be given once per key
    args = list(server_args)
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        name, sep, value = arg[2:].partition("=")
        if not sep and i + 1 < len(args) and not args[i + 1].startswith("--"):
            value = args[i + 1]
        options[name] = value
        if name == "grpc-restricted-protocol":
            restricted += value.partition(":")[0].split(",")
    if options.get("allow-grpc", "true").lower() in _FALSE:
        raise RelayConfigError(
            "the engine relays stream to the engine through the server's own gRPC endpoint, "
            "and tritonserver runs with --allow-grpc=false: allow gRPC (it may listen on loopback "
            "only: --grpc-address=127.0.0.1)"
        )
    if options.get("grpc-use-ssl", "false").lower() not in _FALSE:
        raise RelayConfigError(
            "the engine relays stream to the engine through the server's own gRPC endpoint, "
            "which runs with --grpc-use-ssl: not supported; terminate TLS in front of the server"
        )
    if "inference" in restricted:
        raise RelayConfigError(
            "the engine relays stream to the engine through the server's own gRPC endpoint, "
            "and tritonserver restricts its inference protocol (--grpc-restricted-protocol): "
            "leave inference open on gRPC (bind it to loopback if it must not be reached)"
        )
    address = options.get("grpc-address", "")
    host = "127.0.0.1" if address in _ANY_ADDRESS else address
    return f"{host}:{int(options.get('grpc-port') or DEFAULT_GRPC_PORT)}"


def own_server_target(proc: Path = Path("/proc")) -> str:
    """The gRPC endpoint of the tritonserver that started this stub (its parent: python_backend's
    stub launcher forks the server and `exec`s the stub through `bash -c`, src/stub_launcher.cc)."""
    cmdline = (proc / str(os.getppid()) / "cmdline").read_bytes().split(b"\0")
    return grpc_target([part.decode() for part in cmdline if part])


@dataclass(frozen=True)
class EngineReply:
    """One message of an engine stream: its outputs, or the error it ended with."""

    outputs: dict[str, np.ndarray]
    error: str | None = None


def infer_request(
    model: str,
    arrays: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    request_id: str,
    trace: Mapping[str, str] | None = None,
) -> service_pb2.ModelInferRequest:
    request = service_pb2.ModelInferRequest(model_name=model, id=request_id)
    for key, header in (trace or {}).items():  # the W3C trace context (model_repository/triton/tracing.py)
        request.parameters[key].string_param = header
    for name, array in arrays.items():
        value = np.asarray(array)
        datatype = np_to_triton_dtype(value.dtype)
        request.inputs.add(name=name, datatype=datatype, shape=value.shape)
        if datatype == "BYTES":
            serialized = serialize_byte_tensor(value)
            request.raw_input_contents.append(serialized.item() if serialized.size else b"")
        else:
            request.raw_input_contents.append(np.ascontiguousarray(value).tobytes())
    for name in outputs:
        request.outputs.add(name=name)
    return request


def decode(response: service_pb2.ModelStreamInferResponse) -> EngineReply:
    if response.error_message:
        return EngineReply({}, response.error_message)
    result = response.infer_response
    outputs = {}
    for output, raw in zip(result.outputs, result.raw_output_contents):
        if output.datatype == "BYTES":
            array = deserialize_bytes_tensor(raw)
        else:
            array = np.frombuffer(raw, dtype=triton_to_np_dtype(output.datatype)).copy()
        outputs[output.name] = array.reshape(tuple(output.shape))
    return EngineReply(outputs)


def rpc_failure(error: grpc.RpcError) -> str:
    """An engine call that failed as a call (the server is going down, restarting or
    unreachable): UNAVAILABLE, in our models' code-first form (engine_errors.OUR_CODE)."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else str(error)
    name = code.name if code is not None else "UNKNOWN"
    return f"{CALL_FAILED} ({name}: {details}): the server is stopping or restarting; retry"


class EngineClient:
    """Streams requests to the models of one tritonserver over one gRPC channel; thread-safe
    (each call blocks only its own thread)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)

    def stream(
        self,
        model: str,
        arrays: Mapping[str, np.ndarray],
        outputs: Sequence[str],
        request_id: str,
        timeout_s: float | None = None,
        trace: Mapping[str, str] | None = None,
    ) -> Iterator[EngineReply]:
        """The engine's replies to one request, to the end of the call (the server ends it
        after the request's final response: the request side is closed after the request).
        A call that fails yields one error reply (rpc_failure) and ends."""
        request = infer_request(model, arrays, outputs, request_id, trace)
        metadata = tuple(trace.items()) if trace else None  # Triton's own tracing reads traceparent here
        try:
            for response in self._stub.ModelStreamInfer(iter((request,)), timeout=timeout_s, metadata=metadata):
                yield decode(response)
        except grpc.RpcError as e:
            yield EngineReply({}, rpc_failure(e))

    def stop(self, model: str, arrays: Mapping[str, np.ndarray], request_id: str) -> None:
        """Send a stop request (TensorRT-LLM's protocol: the same id, `stop` true) and read its
        answer to the end."""
        for _ in self.stream(model, arrays, (), request_id, timeout_s=STOP_TIMEOUT_S):
            pass

    def close(self) -> None:
        self._channel.close()
