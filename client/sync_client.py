"""Blocking facade over AsyncLlmClient: one private event loop thread, one gRPC channel
reused by every call (calls from several threads run concurrently)."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Iterator

from client.aio_client import AsyncLlmClient, Prompt
from client.types import GenerationResult, SamplingParams, StreamChunk
from contract import names

_DONE = object()


class LlmClient:
    def __init__(self, url: str = names.DEFAULT_GRPC_URL, model: str = names.ENSEMBLE) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="llm-client-loop", daemon=True)
        self._thread.start()
        self._aio: AsyncLlmClient = self._call(self._make(url, model))

    @staticmethod
    async def _make(url: str, model: str) -> AsyncLlmClient:
        return AsyncLlmClient(url, model)  # the channel must be created on the loop's thread

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        self._call(self._aio.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> "LlmClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def is_ready(self) -> bool:
        return self._call(self._aio.is_ready())

    def metadata(self) -> dict:
        return self._call(self._aio.metadata())

    def generate(
        self,
        prompt: Prompt,
        sampling: SamplingParams = SamplingParams(),
        *,
        timeout_s: float | None = None,
        stream: bool = True,
    ) -> GenerationResult:
        return self._call(self._aio.generate(prompt, sampling, timeout_s=timeout_s, stream=stream))

    def generate_n(
        self,
        prompt: Prompt,
        sampling: SamplingParams = SamplingParams(),
        *,
        timeout_s: float | None = None,
        stream: bool = True,
    ) -> list[GenerationResult]:
        """The `sampling.n` answers, one per sequence_index."""
        return self._call(self._aio.generate_n(prompt, sampling, timeout_s=timeout_s, stream=stream))

    def stream(
        self, prompt: Prompt, sampling: SamplingParams = SamplingParams(), *, timeout_s: float | None = None
    ) -> Iterator[StreamChunk]:
        """Iterate text deltas; closing the iterator early (break, Ctrl-C) cancels the request."""
        chunks: queue.Queue = queue.Queue()

        async def pump():
            try:
                async for chunk in self._aio.stream(prompt, sampling, timeout_s=timeout_s):
                    chunks.put(chunk)
            except BaseException as e:  # delivered to the caller's thread
                chunks.put(e)
            finally:
                chunks.put(_DONE)

        future = asyncio.run_coroutine_threadsafe(pump(), self._loop)
        try:
            while True:
                item = chunks.get()
                if item is _DONE:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            if not future.done():
                future.cancel()  # cancels the gRPC stream, so the server frees the request
