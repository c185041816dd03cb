"""One chat answer with tools: the engine's stream -> OpenAI deltas (content or tool calls),
whole or streamed.  /v1/responses (openai_front/responses.py) answers through it too, with or
without tools (no plan: content deltas only).  With tool_choice auto, a call the model starts is
regenerated under guided decoding (openai_front/tools.py says why); the usage counts the answer returned."""

from __future__ import annotations

import dataclasses
from typing import AsyncGenerator, Callable

from client.errors import ClientError
from client.types import SamplingParams
from openai_front.errors import ApiError
from openai_front.tools import CallStream, ToolPlan, assemble, call_mode
from openai_front.translate import new_id, usage


class ToolTurn:
    def __init__(
        self, client, prompt, sampling: SamplingParams, plan: ToolPlan | None, timeout_s: float | None
    ) -> None:
        self.client, self.prompt, self.sampling, self.plan, self.timeout_s = client, prompt, sampling, plan, timeout_s
        self.prompt_tokens = 0
        self.completion_tokens: dict[int, int] = {}
        self.regenerated = False

    def _open(self, sampling: SamplingParams) -> AsyncGenerator:
        return self.client.stream(self.prompt, sampling, timeout_s=self.timeout_s, request_id=new_id("req"))

    async def events(self) -> AsyncGenerator[tuple[int, dict | None, str | None], None]:
        """(choice index, delta or None, finish_reason or None), in the engine's order."""
        n = self.sampling.n
        mode = call_mode(self.plan) if self.plan is not None else "content"
        calls = {i: CallStream(self.plan, mode) for i in range(n)}
        finished: set[int] = set()
        chunks = self._open(self.sampling)
        try:
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                index = chunk.sequence_index
                self.prompt_tokens = chunk.num_input_tokens
                self.completion_tokens[index] = chunk.num_output_tokens
                if index in finished:
                    continue
                stream = calls[index]
                for delta in stream.feed(chunk.text):
                    yield index, delta, None
                if stream.started_call and not self.regenerated and n == 1:
                    # The model began a call: ask again with the call guided (the same prompt).
                    assert self.plan is not None  # a call starts only where tools were given
                    self.regenerated = True
                    await chunks.aclose()
                    several = stream.text.lstrip().removeprefix("<|python_tag|>").lstrip().startswith("[")
                    guided = dataclasses.replace(self.sampling, guide=self.plan.regeneration_guide(several))
                    calls[index] = CallStream(self.plan, "buffer" if several and self.plan.parallel else "object")
                    chunks = self._open(guided)
                    continue
                if chunk.finish_reason:
                    finished.add(index)
                    deltas, reason = stream.finish(chunk.finish_reason)
                    for delta in deltas:
                        yield index, delta, None
                    yield index, None, reason
        finally:
            await chunks.aclose()
        for index in range(n):  # a stream that ended without a finish reason
            if index not in finished and index in self.completion_tokens:
                deltas, reason = calls[index].finish("stop")
                for delta in deltas:
                    yield index, delta, None
                yield index, None, reason

    def usage(self) -> dict:
        return usage(self.prompt_tokens, sum(self.completion_tokens.values()))

    async def messages(self) -> tuple[dict[int, dict], dict[int, str]]:
        """The whole answer: each choice's assistant message and finish reason."""
        deltas: dict[int, list[dict]] = {}
        finish: dict[int, str] = {}
        async for index, delta, reason in self.events():
            if delta is not None:
                deltas.setdefault(index, []).append(delta)
            if reason is not None:
                finish[index] = reason
        return {i: assemble(deltas.get(i, [])) for i in range(self.sampling.n)}, finish

    async def answer(self, error: Callable[[ClientError], ApiError]) -> tuple[dict[int, dict], dict[int, str]]:
        """messages(), an engine error raised as the ApiError `error` makes of it."""
        try:
            return await self.messages()
        except ClientError as e:
            raise error(e) from None
