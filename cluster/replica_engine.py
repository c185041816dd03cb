"""One replica's engine model as a Dynamo worker calls it: each request streamed over Triton's
gRPC API (KServe `ModelStreamInfer`) under its own request id, in asyncio.

The calls follow the relays' rules (model_repository/triton/engine_grpc.py says why): a call is
never cancelled - Triton 2.51's gRPC frontend races a stream's cancellation against its
completion (server issues #7368, #8034) - but stopped with TensorRT-LLM's stop protocol (a request
with the same id and `stop` true, itself a call that completes), and every call is read to its
end.  So a request's engine stream is pumped by a task of its own, which reads on after the
worker's handler has gone (a client that left), and the stop is a second call."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import AsyncIterator, Mapping

import grpc
import numpy as np
from tritonclient.grpc import service_pb2, service_pb2_grpc

from model_repository.engines.relay.engine_errors import OUR_CODE, classify
from model_repository.engines.relay.relay import forwarded, requested_outputs, stop_request_arrays
from model_repository.triton.engine_grpc import (
    CALL_FAILED,
    CHANNEL_OPTIONS,
    STOP_TIMEOUT_S,
    EngineReply,
    decode,
    infer_request,
    rpc_failure,
)

_END = object()  # the pump's mark that the call ended


class ErrorKind(str, enum.Enum):
    BAD_REQUEST = "bad request"  # the engine refused it: the client's to fix
    OVERLOADED = "overloaded"  # the engine is full: retry later
    REPLICA_GONE = "replica gone"  # the call failed as a call: the server is stopping, restarting or unreachable
    FAILED = "failed"  # the engine failed the request


@dataclass(frozen=True)
class EngineError(Exception):
    kind: ErrorKind
    message: str

    def __str__(self) -> str:
        return self.message


def error_kind(message: str) -> EngineError:
    """What an engine reply's error means for the request (our models' errors carry their code
    first: model_repository/engines/relay/engine_errors.py; a call failure is UNAVAILABLE, from
    engine_grpc.rpc_failure)."""
    if message.startswith(CALL_FAILED):
        return EngineError(ErrorKind.REPLICA_GONE, message)
    code, text = classify(message)
    match = OUR_CODE.match(text)
    code = code or (match.group(1) if match else "INTERNAL")
    kind = {
        "INVALID_ARG": ErrorKind.BAD_REQUEST,
        "UNSUPPORTED": ErrorKind.BAD_REQUEST,
        "NOT_FOUND": ErrorKind.BAD_REQUEST,
        "UNAVAILABLE": ErrorKind.OVERLOADED,
    }.get(code, ErrorKind.FAILED)
    return EngineError(kind, text)


class ReplicaEngine:
    """The engine model of one tritonserver, over one gRPC channel."""

    def __init__(self, target: str, model: str) -> None:
        self.target = target
        self.model = model
        self._channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        self._pumps: set[asyncio.Task] = set()  # streams and stop calls, read on after their handler left

    async def ready(self, timeout_s: float = 2.0) -> bool:
        """The server is live and ready, and so is the engine model."""
        try:
            server = await self._stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=timeout_s)
            model = await self._stub.ModelReady(service_pb2.ModelReadyRequest(name=self.model), timeout=timeout_s)
        except grpc.aio.AioRpcError:
            return False
        return bool(server.ready and model.ready)

    async def _call(self, request: service_pb2.ModelInferRequest, replies: asyncio.Queue) -> None:
        async def one() -> AsyncIterator[service_pb2.ModelInferRequest]:
            yield request

        try:
            async for response in self._stub.ModelStreamInfer(one()):
                replies.put_nowait(decode(response))
        except grpc.aio.AioRpcError as e:
            replies.put_nowait(EngineReply({}, rpc_failure(e)))
        finally:
            replies.put_nowait(_END)

    def start(self, arrays: Mapping[str, np.ndarray], request_id: str) -> "EngineCall":
        request = infer_request(self.model, forwarded(arrays), requested_outputs(arrays), request_id)
        replies: asyncio.Queue = asyncio.Queue()
        self.run_on(self._call(request, replies))
        return EngineCall(self, request_id, replies)

    def run_on(self, work) -> asyncio.Task:
        """`work` on a task of its own that close() waits for (it outlives the handler that started it)."""
        task = asyncio.get_running_loop().create_task(work)
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)
        return task

    async def stop(self, request_id: str) -> None:
        """TensorRT-LLM's stop protocol: the target cancels the running request with this id."""
        request = infer_request(self.model, stop_request_arrays(), (), request_id)
        replies: asyncio.Queue = asyncio.Queue()
        try:
            await asyncio.wait_for(self._call(request, replies), STOP_TIMEOUT_S)
        except asyncio.TimeoutError:
            pass

    async def close(self) -> None:
        if self._pumps:
            await asyncio.wait(self._pumps, timeout=STOP_TIMEOUT_S)
        await self._channel.close()


class EngineCall:
    """One request's engine stream: `replies()` until the call ends; `stop()` from anywhere."""

    def __init__(self, engine: ReplicaEngine, request_id: str, replies: asyncio.Queue) -> None:
        self._engine = engine
        self.request_id = request_id
        self._replies = replies
        self.ended = False
        self._stopping: asyncio.Task | None = None

    async def replies(self) -> AsyncIterator[dict[str, np.ndarray]]:
        """Each response's outputs; raises EngineError on the call's error reply."""
        while True:
            reply = await self._replies.get()
            if reply is _END:
                self.ended = True
                return
            if reply.error is not None:
                raise error_kind(reply.error)
            yield reply.outputs

    def stop(self) -> None:
        """Stop the engine request (once; the stop call runs on its own task)."""
        if self._stopping is None and not self.ended:
            self._stopping = self._engine.run_on(self._engine.stop(self.request_id))
