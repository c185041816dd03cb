"""asyncio client: one gRPC channel, any number of concurrent streams over it.

Every request is one bidirectional gRPC stream, even when not streaming text: the ensemble
is decoupled, and a stream is what lets a timeout or a cancellation reach the server, which
then frees the request's engine slot.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from typing import AsyncGenerator, Sequence

import grpc
import tritonclient.grpc.aio as grpcclient
from tritonclient.grpc import MAX_GRPC_MESSAGE_SIZE, KeepAliveOptions
from tritonclient.utils import InferenceServerException

from client.errors import ClientError, RequestCancelled, RequestTimeout, ServerUnavailable, from_triton
from client.request_builder import build_inputs, requested_outputs, stop_inputs
from client.response_parser import is_final, parse_chunk
from client.tracing import RequestSpan
from client.types import ChatMessage, GenerationResult, PromptLogprobs, SamplingParams, StreamChunk
from contract import lora, names, request_ids

Prompt = str | Sequence[ChatMessage]


# tritonclient's own channel settings (message sizes, keepalive), and a short reconnect backoff:
# a restarted server is back within seconds, while gRPC's default backoff grows to 120 s, and a
# channel in backoff (any channel of the process to that address with these settings: they share
# subchannels) fails every call at once until its next attempt.
CHANNEL_ARGS = [
    ("grpc.max_send_message_length", MAX_GRPC_MESSAGE_SIZE),
    ("grpc.max_receive_message_length", MAX_GRPC_MESSAGE_SIZE),
    ("grpc.keepalive_time_ms", KeepAliveOptions().keepalive_time_ms),
    ("grpc.keepalive_timeout_ms", KeepAliveOptions().keepalive_timeout_ms),
    ("grpc.keepalive_permit_without_calls", KeepAliveOptions().keepalive_permit_without_calls),
    ("grpc.http2.max_pings_without_data", KeepAliveOptions().http2_max_pings_without_data),
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


class AsyncLlmClient:
    def __init__(self, url: str = names.DEFAULT_GRPC_URL, model: str = names.ENSEMBLE) -> None:
        self.url = url
        self.model = model
        self._client = grpcclient.InferenceServerClient(url=url, channel_args=CHANNEL_ARGS)
        self._stopping: set[asyncio.Task] = set()

    async def close(self) -> None:
        if self._stopping:
            await asyncio.wait(self._stopping, timeout=5)
        await self._client.close()

    async def __aenter__(self) -> "AsyncLlmClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- health -------------------------------------------------------------------------
    async def is_ready(self) -> bool:
        try:
            return await self._client.is_server_ready() and await self._client.is_model_ready(self.model)
        except InferenceServerException:
            return False

    async def _deployment_parameter(self, name: str) -> str:
        """A parameter of preprocessing's model configuration (every layout has it; '' when absent)."""
        try:
            config = await self._client.get_model_config(names.PREPROCESSING, as_json=True)
        except InferenceServerException:
            return ""
        return config.get("config", config).get("parameters", {}).get(name, {}).get("string_value", "")

    async def lora_adapters(self) -> dict[str, int]:
        """The LoRA adapters the server serves, name -> lora_task_id ({} when none)."""
        return lora.served_from_parameter(await self._deployment_parameter("lora_adapters"))

    async def system_fingerprint(self) -> str:
        """What the deployment computes with, as a hash (build_engines/served_identity.py; '' when
        the repository predates it)."""
        return await self._deployment_parameter("system_fingerprint")

    async def metadata(self) -> dict:
        try:
            server = await self._client.get_server_metadata(as_json=True)
            model = await self._client.get_model_metadata(self.model, as_json=True)
        except InferenceServerException as e:
            raise from_triton(e) from None
        return {"server": server, "model": model}

    # --- generation -----------------------------------------------------------------------
    async def stream(
        self,
        prompt: Prompt,
        sampling: SamplingParams = SamplingParams(),
        *,
        timeout_s: float | None = None,
        stream: bool = True,
        request_id: str | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        """Yield text deltas as the server produces them.  Leaving the loop early (break,
        exception, task cancellation) or passing `timeout_s` cancels the request on the
        server."""
        inputs = build_inputs(prompt, sampling, stream)
        echo = prompt if sampling.echo and isinstance(prompt, str) else ""
        # The caller's id, else the one bound to this task (the OpenAI front's), else a new one.
        request_id = request_id or request_ids.current() or uuid.uuid4().hex
        traced = RequestSpan(self.model, request_id, stream, prompt)  # client/tracing.py
        request = {
            "model_name": self.model,
            "inputs": inputs,
            "outputs": requested_outputs(sampling),
            "request_id": request_id,
            "parameters": {"triton_enable_empty_final_response": True, **traced.parameters},
        }

        async def one_request():
            yield request

        t0 = time.monotonic()
        deadline = None if timeout_s is None else t0 + timeout_s
        responses = self._client.stream_infer(one_request(), headers=traced.headers)
        iterator = responses.__aiter__()
        finished = False
        failure: BaseException | None = None
        try:
            while True:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise RequestTimeout(f"no complete answer within {timeout_s}s; the request was cancelled")
                try:
                    result, error = await asyncio.wait_for(iterator.__anext__(), remaining)
                except asyncio.TimeoutError:
                    raise RequestTimeout(f"no complete answer within {timeout_s}s; the request was cancelled") from None
                except StopAsyncIteration:
                    raise ClientError("the server closed the stream before the final response") from None
                except InferenceServerException as e:
                    raise _unavailable_or(e) from None
                except grpc.RpcError as e:
                    raise _rpc_error(e) from None
                if error is not None:
                    raise from_triton(error)
                chunk = parse_chunk(result, time.monotonic() - t0)
                if chunk is not None:
                    traced.on_chunk(chunk)
                    if echo:
                        chunk, echo = dataclasses.replace(chunk, text=echo + chunk.text), ""
                    yield chunk
                if is_final(result):
                    finished = True
                    break
            # Read the stream to its end so the call closes with its status (an abandoned
            # call leaves state behind on the server).
            async for _ in iterator:
                pass
        except BaseException as e:
            failure = e
            raise
        finally:
            traced.end(failure, finished)
            if not finished:
                responses.cancel()
                # Triton's ensemble does not pass a cancellation on to the engine step that
                # is already running (contract/tensors.py, STOP), so also ask the model we
                # called to stop this request id; every step forwards it to the engine.
                task = asyncio.get_running_loop().create_task(self._stop_on_server(request_id))
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    async def _stop_on_server(self, request_id: str) -> None:
        request = {
            "model_name": self.model,
            "inputs": stop_inputs(),
            "request_id": request_id,
            "parameters": {"triton_enable_empty_final_response": True},
        }

        async def one():
            yield request

        try:
            async for _ in self._client.stream_infer(one()):
                break  # acknowledged with one empty final response
        except Exception:  # best effort: the engine request still ends at its max_tokens
            pass

    async def generate(
        self,
        prompt: Prompt,
        sampling: SamplingParams = SamplingParams(),
        *,
        timeout_s: float | None = None,
        stream: bool = True,
    ) -> GenerationResult:
        """The whole answer, with token counts and timings (TTFT, per-chunk arrivals)."""
        if sampling.n != 1:
            raise ValueError("generate() returns one answer: use generate_n() for n > 1")
        return (await self.generate_n(prompt, sampling, timeout_s=timeout_s, stream=stream))[0]

    async def generate_n(
        self,
        prompt: Prompt,
        sampling: SamplingParams = SamplingParams(),
        *,
        timeout_s: float | None = None,
        stream: bool = True,
    ) -> list[GenerationResult]:
        """The n answers of `sampling.n` (one GenerationResult per sequence_index, in order)."""
        t0 = time.monotonic()
        collected = [_Collector() for _ in range(sampling.n)]
        async for chunk in self.stream(prompt, sampling, timeout_s=timeout_s, stream=stream):
            collected[chunk.sequence_index].add(chunk)
        latency = time.monotonic() - t0
        return [c.result(latency, stream) for c in collected]


class _Collector:
    """One sequence's chunks -> its GenerationResult."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.times: list[float] = []
        self.log_probs: list[float] = []
        self.top_logprobs: list = []
        self.token_ids: list[int] = []
        self.prompt_logprobs: PromptLogprobs | None = None
        self.last: StreamChunk | None = None
        self.finish = ""
        self.first_text_s: float | None = None

    def add(self, chunk: StreamChunk) -> None:
        self.parts.append(chunk.text)
        self.times.append(chunk.arrived_s)
        self.log_probs.extend(chunk.log_probs)
        self.top_logprobs.extend(chunk.top_logprobs)
        self.token_ids.extend(chunk.token_ids)
        self.prompt_logprobs = self.prompt_logprobs or chunk.prompt_logprobs
        if self.first_text_s is None and chunk.text:
            self.first_text_s = chunk.arrived_s
        self.finish = self.finish or chunk.finish_reason
        self.last = chunk

    def result(self, latency: float, stream: bool) -> GenerationResult:
        last = self.last
        return GenerationResult(
            text="".join(self.parts),
            finish_reason=self.finish,
            prompt_tokens=last.num_input_tokens if last else 0,
            completion_tokens=last.num_output_tokens if last else 0,
            ttft_s=(self.first_text_s if self.first_text_s is not None else latency) if stream else None,
            latency_s=latency,
            chunk_times_s=self.times,
            token_ids=self.token_ids,
            log_probs=self.log_probs,
            top_logprobs=self.top_logprobs,
            prompt_logprobs=self.prompt_logprobs,
        )


def _rpc_error(e: grpc.RpcError) -> ClientError:
    code = e.code() if hasattr(e, "code") else None
    details = e.details() if hasattr(e, "details") else str(e)
    if code == grpc.StatusCode.UNAVAILABLE:
        return ServerUnavailable(details)
    if code == grpc.StatusCode.CANCELLED:
        return RequestCancelled(details)
    return ClientError(f"{code}: {details}")


def _unavailable_or(e: InferenceServerException) -> ClientError:
    mapped = from_triton(e)
    if type(mapped) is ClientError and "connect" in str(e).lower():
        return ServerUnavailable(str(e))
    return mapped
