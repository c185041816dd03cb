"""POST /v1/responses, GET and DELETE /v1/responses/{id}: the request translated and the answer
shaped by openai_front/responses.py, kept in the response store (openai_front/response_store.py)."""

from __future__ import annotations

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from openai_front import responses
from openai_front.errors import ApiError
from openai_front.response_store import OFF_REASON, ResponseStore
from openai_front.responses_schemas import ResponseCreateRequest
from openai_front.served import Served
from openai_front.streaming import answer_stream
from openai_front.tool_responses import ToolTurn


class ResponseRoutes:
    def __init__(self, served: Served) -> None:
        self.served = served
        self.store = ResponseStore(served.settings.response_store)

    def history_of(self, previous: str | None) -> tuple[dict, ...]:
        store = self.store
        if previous is None:
            return ()
        if not store.enabled:
            raise ApiError(
                400,
                f"'previous_response_id' cannot be honoured: {OFF_REASON}; send the whole "
                "conversation in 'input' instead",
                param="previous_response_id",
                code="response_store_disabled",
            )
        found = store.get(previous)
        if found is None:
            raise ApiError(
                400,
                f"Previous response with id {previous!r} not found (this server keeps responses "
                f"stored with store: true for {store.settings.ttl_s:g} s, the latest "
                f"{store.settings.max_entries} at most)",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        return found.conversation

    def not_found(self, response_id: str) -> ApiError:
        store = self.store
        why = (
            OFF_REASON
            if not store.enabled
            else (
                f"responses are kept only when created with store: true, for {store.settings.ttl_s:g} s, the latest "
                f"{store.settings.max_entries} at most"
            )
        )
        return ApiError(
            404, f"Response with id {response_id!r} not found: {why}", param="response_id", code="response_not_found"
        )

    async def create_response(self, req: ResponseCreateRequest, request: Request):
        served = self.served
        history = self.history_of(req.previous_response_id)
        items, messages, sampling, plan = responses.translate(
            req, history, tool_format=served.tool_format, model=served.model_name
        )
        sampling = await served.sampling_for(req.model, sampling, request)
        builder = responses.ResponseBuilder(req, stored=req.store and self.store.enabled)
        turn = ToolTurn(served.client, messages, sampling, plan, served.request_timeout_s)  # the chat path's answer

        def keep(body: dict) -> None:
            if builder.stored:
                self.store.put(builder.id, body, (*history, *items, *body["output"]))

        if req.stream:
            return await answer_stream(
                request, turn.events(), responses.ResponseEvents(builder, turn, keep), responses.engine_error
            )
        answers, finishes = await turn.answer(responses.engine_error)
        finish = finishes.get(0, "stop")
        body = builder.body(
            responses.status_of(finish),
            builder.output_items(answers[0], finish),
            responses.response_usage(turn.usage()),
        )
        keep(body)
        return body

    async def retrieve_response(self, response_id: str):
        found = self.store.get(response_id)
        if found is None:
            raise self.not_found(response_id)
        return found.response

    async def delete_response(self, response_id: str):
        if not self.store.delete(response_id):
            raise self.not_found(response_id)
        return JSONResponse({"id": response_id, "object": "response", "deleted": True})


def register(app: FastAPI, served: Served) -> ResponseStore:
    routes = ResponseRoutes(served)
    authorized = [Depends(served.authorized)]
    app.post(responses.ROUTE, dependencies=authorized)(routes.create_response)
    app.get(responses.ROUTE + "/{response_id}", dependencies=authorized)(routes.retrieve_response)
    app.delete(responses.ROUTE + "/{response_id}", dependencies=authorized)(routes.delete_response)
    return routes.store
