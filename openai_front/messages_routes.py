"""POST /v1/messages and /v1/messages/count_tokens: the request translated and the answer shaped
by openai_front/messages.py; stop sequences matched by openai_front/stop_sequences.py."""

from __future__ import annotations

import dataclasses

from fastapi import Depends, FastAPI, Request

from openai_front import messages as api
from openai_front.messages_schemas import CountTokensRequest, MessagesRequest
from openai_front.served import Served
from openai_front.stop_sequences import StopSequenceClient
from openai_front.streaming import answer_stream, first_of
from openai_front.tool_responses import ToolTurn


class MessageRoutes:
    def __init__(self, served: Served) -> None:
        self.served = served

    async def create_message(self, req: MessagesRequest, request: Request):
        served = self.served
        messages, sampling, plan = api.translate(req, tool_format=served.tool_format, model=served.model_name)
        sampling = await served.sampling_for(req.model, sampling, request)
        stops = tuple(req.stop_sequences or ())
        engine = StopSequenceClient(served.client, stops) if stops else None
        turn = ToolTurn(engine or served.client, messages, sampling, plan, served.request_timeout_s)
        message_id = api.new_message_id()

        def matched() -> str | None:
            return engine.matched if engine else None

        if req.stream:
            framing = api.MessageEvents(message_id, req.model, turn, matched)
            return await answer_stream(request, turn.events(), framing, api.engine_error)
        answers, finishes = await turn.answer(api.engine_error)
        reason = api.stop_reason(finishes.get(0, "stop"), matched())
        return api.message_body(
            message_id, req.model, api.content_blocks(answers[0]), reason, matched(), api.usage_of(turn)
        )

    async def count_tokens(self, req: CountTokensRequest, request: Request):
        """The prompt's tokens as the engine counts them: the prompt /v1/messages would send (the
        chat template, the tools described as the tool plan describes them), tokenized by
        preprocessing; one token is generated to read the count, and the request is then closed."""
        served = self.served
        full = MessagesRequest.model_validate(req.model_dump(exclude_none=True) | {"max_tokens": 1})
        messages, sampling, _ = api.translate(full, tool_format=served.tool_format, model=served.model_name)
        sampling = await served.sampling_for(req.model, sampling, request)
        chunks = served.client.stream(
            messages,
            dataclasses.replace(sampling, max_tokens=1, min_tokens=None, guide=None),
            timeout_s=served.request_timeout_s,
        )
        try:
            first = await first_of(chunks, api.engine_error)
        finally:
            await chunks.aclose()
        return {"input_tokens": first.num_input_tokens if first is not None else 0}


def register(app: FastAPI, served: Served) -> None:
    routes = MessageRoutes(served)
    authorized = [Depends(served.authorized)]
    app.post(api.ROUTE, dependencies=authorized)(routes.create_message)
    app.post(api.ROUTE + "/count_tokens", dependencies=authorized)(routes.count_tokens)
