"""POST /v1/completions and /v1/chat/completions: the request translated
(openai_front/translate.py), answered by openai_front/chat_answers.py."""

from __future__ import annotations

from fastapi import Depends, FastAPI, Request

from openai_front.chat_answers import Asked, ChatAnswers
from openai_front.schemas import ChatCompletionRequest, CompletionRequest
from openai_front.served import Served
from openai_front.translate import (
    chat_prompt_shape,
    chat_turn,
    completion_input,
    completion_prompt_shape,
    prompt_token_ids,
)


def register(app: FastAPI, served: Served) -> None:
    answers = ChatAnswers(served)

    @app.post("/v1/completions", dependencies=[Depends(served.authorized)])
    async def completions(req: CompletionRequest, request: Request):
        token_texts = served.token_texts
        prompt, sampling = completion_input(req, token_texts.decode if token_texts else None)
        asked = Asked(chat=False, prompt_shape=completion_prompt_shape(req), prompt_ids=prompt_token_ids(req))
        return await answers.answer(req, request, prompt, sampling, asked)

    @app.post("/v1/chat/completions", dependencies=[Depends(served.authorized)])
    async def chat_completions(req: ChatCompletionRequest, request: Request):
        messages, sampling, plan = chat_turn(req, tool_format=served.tool_format, model=served.model_name)
        asked = Asked(chat=True, tools=plan, prompt_shape=chat_prompt_shape(req))
        return await answers.answer(req, request, messages, sampling, asked)
