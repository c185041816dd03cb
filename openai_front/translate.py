"""OpenAI requests -> our client's (prompt, SamplingParams); our results -> OpenAI bodies."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from typing import Callable

from client.types import ChatMessage, GenerationResult, Guide, SamplingParams, StreamChunk
from contract import params, sampling_fields, tool_formats
from openai_front.errors import invalid, unsupported
from openai_front.logprobs import TokenTexts
from openai_front.params import CHAT, COMPLETIONS, check_extensions, check_policy
from openai_front.prompt_logprobs import PromptShape, prompt_shape, shape_choice, vllm_entries
from openai_front.schemas import ChatCompletionRequest, CompletionRequest, RequestBase
from openai_front.tools import FORMATS, ToolFormat, ToolPlan, tool_plan

MAX_N = 16  # samples per request (each holds a KV-cache sequence)
MAX_COMPLETION_LOGPROBS = 5  # OpenAI's bound for the completions endpoint's `logprobs`


def _common_checks(req: RequestBase) -> None:
    if not 1 <= req.n <= MAX_N:
        raise invalid(f"'n' must be in [1, {MAX_N}], got {req.n}", "n")
    if req.logit_bias:
        raise unsupported("logit_bias", "the engines take no per-token bias")


# vLLM's structured_outputs (vllm/sampling_params.py StructuredOutputsParams, vllm-project/vllm
# @00388f65): exactly one of json, regex, choice, grammar, json_object (structural_tag refused:
# VLLM_EXTENSIONS); the guided_* fields are its older spelling.
_GUIDED = ("guided_json", "guided_regex", "guided_grammar", "guided_choice")
_STRUCTURED = ("json", "regex", "choice", "grammar", "json_object")


def _guide(req: RequestBase) -> Guide | None:
    """vLLM's guided decoding (guided_* or structured_outputs: a JSON schema, a regex, an EBNF
    grammar or a choice of strings) on both endpoints, as one Guide."""
    given = [(k, getattr(req, k)) for k in _GUIDED if getattr(req, k) is not None]
    structured = req.structured_outputs or {}
    unknown = sorted(set(structured) - set(_STRUCTURED) - {"disable_any_whitespace", "disable_additional_properties"})
    if unknown or any(structured.get(k) for k in ("disable_any_whitespace", "disable_additional_properties")):
        field = next(iter(unknown), "disable_any_whitespace")
        raise unsupported(
            f"structured_outputs.{field}", "the guide is a JSON schema, a regex, an EBNF grammar or a choice"
        )
    given += [(f"structured_outputs.{k}", structured[k]) for k in _STRUCTURED if structured.get(k) is not None]
    if len(given) > 1:
        raise invalid(f"send one guide; got {[k for k, _ in given]}", given[1][0])
    if not given:
        return None
    name, value = given[0]
    kind = name.rsplit(".", 1)[-1].removeprefix("guided_")
    if kind == "json_object":
        return Guide.json_schema({"type": "object"}) if value else None
    if kind == "json":
        return Guide("json_schema", value if isinstance(value, str) else json.dumps(value))
    if kind == "choice":
        return Guide("ebnf_grammar", choice_grammar(value, name))
    if not isinstance(value, str):
        raise invalid(f"'{name}' must be a string", name)
    return Guide("regex" if kind == "regex" else "ebnf_grammar", value)


def choice_grammar(choices: object, name: str = "guided_choice") -> str:
    """An EBNF grammar whose only sentences are the given strings (vLLM's guided_choice)."""
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c for c in choices):
        raise invalid(f"'{name}' must be a non-empty list of non-empty strings", name)
    return "root ::= " + " | ".join(json.dumps(c, ensure_ascii=False) for c in choices)


def _sampling(
    req: RequestBase,
    max_tokens: int | None,
    echo: bool = False,
    *,
    log_probs: bool = False,
    top_logprobs: int = 0,
    guide: Guide | None = None,
    prompt: PromptShape | None = None,
) -> SamplingParams:
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    min_tokens = req.min_tokens
    if req.ignore_eos:
        if max_tokens is None:
            raise invalid("'ignore_eos' needs 'max_tokens'", "ignore_eos")
        min_tokens = max_tokens
    temperature = req.temperature
    if req.n > 1 and temperature is None:
        temperature = 1.0  # OpenAI's default: n samples, not n copies of the greedy answer
    adjusted = {"temperature": temperature, "min_tokens": min_tokens}
    return SamplingParams(
        # the sampling fields (contract/sampling_fields.py), each the request's field of its name
        **({name: getattr(req, name) for name in sampling_fields.NAMES} | adjusted),
        max_tokens=max_tokens,
        n=req.n,
        return_log_probs=log_probs,
        top_logprobs=top_logprobs,
        guide=guide,
        stop=stop,
        skip_special_tokens=req.skip_special_tokens,
        echo=echo,
        priority=req.priority,
        prompt_logprobs=prompt.engine_k if prompt is not None else None,
    )


PRIORITY_HEADER = "x-request-priority"


def with_priority_header(sampling: SamplingParams, header: str | None) -> SamplingParams:
    """The X-Request-Priority header, where the body has no `priority` (a proxy or gateway can
    set it per route or per tenant without touching bodies)."""
    if header is None or sampling.priority is not None:
        return sampling
    try:
        value = float(header)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise invalid(
            f"header X-Request-Priority must be a number in [0, 1] (higher first), got {header!r}", "priority"
        )
    return dataclasses.replace(sampling, priority=value)


def prompt_token_ids(req: CompletionRequest) -> list[int] | None:
    """The prompt's token ids where it was sent as ids (`[1, 2]` or `[[1, 2]]`, as lm-evaluation-harness
    sends it by default), else None."""
    prompt = req.prompt
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
        prompt = prompt[0]
    if not isinstance(prompt, list) or not prompt:
        return None
    ids = [t for t in prompt if isinstance(t, int)]
    return ids if len(ids) == len(prompt) else None


def completion_input(
    req: CompletionRequest, decode: Callable[[list[int]], str] | None = None
) -> tuple[str, SamplingParams]:
    """`decode`: token ids -> text (the front's tokenizer), for a prompt sent as token ids."""
    _common_checks(req)
    check_extensions(req, COMPLETIONS)
    if req.best_of not in (None, 1):
        raise unsupported("best_of", "only 1")
    if req.suffix:
        raise unsupported("suffix")
    prompt = req.prompt
    ids = prompt_token_ids(req)
    if ids is not None:
        if decode is None:
            raise unsupported("prompt", "as token ids without --tokenizer (the checkpoint's tokenizer.json)")
        try:
            prompt = decode(ids)
        except ValueError as e:
            raise invalid(f"'prompt': {e}", "prompt") from None
    elif isinstance(prompt, list):
        if len(prompt) != 1 or not isinstance(prompt[0], str):
            raise unsupported("prompt", "send one prompt per request (a list of one string or of token ids is fine)")
        prompt = prompt[0]
    log_probs, top = _completion_logprobs(req)
    shape = completion_prompt_shape(req)
    guide = _response_format(req.response_format)
    if guide is not None and _guide(req) is not None:
        raise invalid("send one of response_format, guided_*, structured_outputs", "response_format")
    # max_tokens 0 (the prompt scored): the engine generates one token, which the answer leaves out
    # (the ensemble contract's max_tokens is at least 1)
    max_tokens = 1 if shape is not None and shape.prompt_only else req.max_tokens
    return prompt, _sampling(
        req,
        max_tokens,
        echo=req.echo,
        log_probs=log_probs and not (shape is not None and shape.prompt_only),
        top_logprobs=0 if shape is not None and shape.prompt_only else top,
        guide=guide or _guide(req),
        prompt=shape,
    )


def _completion_logprobs(req: CompletionRequest) -> tuple[bool, int]:
    log_probs = req.logprobs is not None and req.logprobs is not False
    top = int(req.logprobs or 0) if log_probs else 0
    if not 0 <= top <= MAX_COMPLETION_LOGPROBS:
        raise invalid(f"'logprobs' must be in [0, {MAX_COMPLETION_LOGPROBS}], got {top}", "logprobs")
    return log_probs, top


def completion_prompt_shape(req: CompletionRequest) -> PromptShape | None:
    """What a completions request asks of its prompt (echo with logprobs, max_tokens 0, prompt_logprobs)."""
    log_probs, top = _completion_logprobs(req)
    return prompt_shape(req, echo=req.echo, log_probs=log_probs, top=top)


def chat_prompt_shape(req: ChatCompletionRequest) -> PromptShape | None:
    """vLLM's prompt_logprobs on the chat endpoint (over the rendered chat template's tokens)."""
    if req.max_tokens == 0 or req.max_completion_tokens == 0:
        raise invalid("'max_tokens' must be at least 1 on /v1/chat/completions", "max_tokens")
    return prompt_shape(req, echo=False, log_probs=False, top=0)


def _content(message, index: int, tool_format: ToolFormat = FORMATS[tool_formats.JSON]) -> str:
    if message.tool_calls:  # an earlier call, as the model writes it (after any text it wrote first)
        text = _content(message.model_copy(update={"tool_calls": None}), index)
        return (text + "\n" if text else "") + tool_format.render_calls(message.tool_calls)
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    texts = []
    for part in message.content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise unsupported(f"messages[{index}].content", "only text parts")
        texts.append(part["text"])
    return "".join(texts)


def chat_input(
    req: ChatCompletionRequest, *, tool_format: str = tool_formats.JSON, model: str = "the model"
) -> tuple[list[ChatMessage], SamplingParams]:
    """chat_turn's prompt and sampling, for a caller that does not answer with the tool plan."""
    prompt, sampling, _ = chat_turn(req, tool_format=tool_format, model=model)
    return prompt, sampling


def chat_turn(
    req: ChatCompletionRequest, *, tool_format: str = tool_formats.JSON, model: str = "the model"
) -> tuple[list[ChatMessage], SamplingParams, ToolPlan | None]:
    """The chat request's prompt, sampling and tool plan (computed once here: the checks, the
    guide and the prompt's tool description read it, and the answer is made with it)."""
    _common_checks(req)
    check_policy(req)
    check_extensions(req, CHAT)
    _check_generation_prompt(req)
    plan = chat_tool_plan(req, tool_format=tool_format, model=model)
    if plan is not None and req.prompt_logprobs is not None:
        raise unsupported("prompt_logprobs", "with 'tools' (send tool_choice 'none' for the prompt's log probs)")
    if plan is not None and req.logprobs:
        raise unsupported("logprobs", "with 'tools' (send tool_choice 'none' for log probs of a text answer)")
    if plan is not None and plan.auto and req.n != 1:
        raise unsupported("n", "only 1 with tool_choice 'auto'")
    if req.top_logprobs is not None:
        if not req.logprobs:
            raise invalid("'top_logprobs' needs 'logprobs': true", "top_logprobs")
        try:
            params.check("top_logprobs", req.top_logprobs)  # the server's rule (contract/params.py)
        except params.InvalidParameter as e:
            raise invalid(str(e), "top_logprobs") from None
    guide = _response_format(req.response_format) or _guide(req)
    if plan is not None:
        if guide is not None:
            raise invalid(
                "'tools' (unless tool_choice is 'none') fix the output format themselves; drop 'response_format'",
                "response_format",
            )
        guide = plan.guide()
    written_as = plan.format if plan is not None and plan.auto else FORMATS.get(tool_format, FORMATS[tool_formats.JSON])
    messages = [
        ChatMessage("system" if m.role == "developer" else m.role, _content(m, i, written_as))
        for i, m in enumerate(req.messages)
    ]
    if plan is not None:
        messages = plan.messages(messages)
    sampling = _sampling(
        req,
        req.max_completion_tokens or req.max_tokens,
        log_probs=bool(req.logprobs),
        top_logprobs=req.top_logprobs or 0,
        guide=guide,
        prompt=chat_prompt_shape(req),
    )
    return messages, sampling, plan


def _check_generation_prompt(req: ChatCompletionRequest) -> None:
    """vLLM's add_generation_prompt, as far as preprocessing renders the template: it adds the
    assistant's opening unless the last message is the assistant's (model_repository/text/
    preprocessor.py prompt_ids)."""
    if req.add_generation_prompt is None:
        return
    ends_with_assistant = req.messages[-1].role == "assistant"
    if req.add_generation_prompt == ends_with_assistant:
        raise unsupported(
            "add_generation_prompt",
            f"{str(req.add_generation_prompt).lower()} when the last message is "
            f"{'the assistant' if ends_with_assistant else 'not the assistant'}'s: preprocessing adds the "
            "generation prompt exactly when the last message is not the assistant's",
        )


def chat_from_fields(
    model: str, messages: list, fields: dict, *, tool_format: str = tool_formats.JSON, model_ref: str = "the model"
) -> tuple[list[ChatMessage], SamplingParams, ToolPlan | None]:
    """Another API's request as a chat completion request of only the fields it sent (the chat
    path's defaults stay its own), translated: prompt, sampling and tool plan (/v1/responses,
    /v1/messages).  Raises ApiError or pydantic's ValidationError in the chat request's names."""
    chat = ChatCompletionRequest.model_validate(
        {"model": model, "messages": messages} | {k: v for k, v in fields.items() if v is not None}
    )
    return chat_turn(chat, tool_format=tool_format, model=model_ref)


def chat_tool_plan(
    req: ChatCompletionRequest, *, tool_format: str = tool_formats.JSON, model: str = "the model"
) -> ToolPlan | None:
    return tool_plan(
        req.tools, req.tool_choice, tool_format=tool_format, model=model, parallel_tool_calls=req.parallel_tool_calls
    )


def _response_format(fmt: dict | None) -> Guide | None:
    """OpenAI response_format -> guided decoding: json_object = any JSON object; json_schema =
    the schema (strict or not, the engine constrains every token, so it always validates)."""
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return Guide.json_schema({"type": "object"})
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
            raise invalid("'response_format.json_schema' must be an object with a 'schema' object", "response_format")
        return Guide.json_schema(spec.get("schema") or {"type": "object"})
    raise invalid(f"'response_format.type' {kind!r} is not one of text, json_object, json_schema", "response_format")


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


class ResponseShaper:
    """Builds the bodies of one response (shared id, created, model); `token_texts` given when
    the request asked for log probs."""

    def __init__(self, model: str, chat: bool, token_texts=None, system_fingerprint: str | None = None) -> None:
        self.chat = chat
        self.id = new_id("chatcmpl" if chat else "cmpl")
        self.created = int(time.time())
        self.model = model
        self.token_texts = token_texts
        self.system_fingerprint = system_fingerprint or None  # the deployment's (served_identity)
        # What the request asked of its prompt (openai_front/prompt_logprobs.py), its text and the
        # tokenizer's table that names the prompt's tokens.
        self.prompt: PromptShape | None = None
        self.prompt_text = ""
        self.prompt_texts: TokenTexts | None = None
        self.prompt_ids: list[int] | None = None  # a prompt sent as token ids (checked against the engine's)

    def envelope(self, obj: str, choices: list[dict], **extra) -> dict:
        return {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.system_fingerprint,
            "choices": choices,
        } | extra

    def _logprobs(self, ids, log_probs, tops=()) -> dict | None:
        if self.token_texts is None:
            return None
        if self.chat:
            return {"content": self.token_texts.chat_content(ids, log_probs, tops), "refusal": None}
        return self.token_texts.completion(ids, log_probs, tops=tops)

    def whole(self, results: list[GenerationResult]) -> dict:
        choices = []
        for index, result in enumerate(results):
            finish = result.finish_reason or "stop"
            logprobs = self._logprobs(result.token_ids, result.log_probs, result.top_logprobs)
            if self.chat:
                message, finish = self.message(result.text, finish)
                choices.append({"index": index, "message": message, "finish_reason": finish, "logprobs": logprobs})
            else:
                choices.append({"index": index, "text": result.text, "finish_reason": finish, "logprobs": logprobs})
        prompt = results[0].prompt_tokens if results else 0
        generated = sum(r.completion_tokens for r in results)
        extra = {}
        shape = self.prompt
        if shape is not None and results:
            self._check_prompt_ids(results[0])
            if shape.prompt_only:
                generated = 0
            if not self.chat:
                choices = [
                    shape_choice(c, r, shape, self.prompt_texts, self.prompt_text) for c, r in zip(choices, results)
                ]
            elif shape.vllm is not None and results[0].prompt_logprobs and self.prompt_texts:  # vLLM: on the response
                extra["prompt_logprobs"] = vllm_entries(self.prompt_texts, results[0].prompt_logprobs, shape.vllm)
        used = usage(prompt, generated)
        return self.envelope("chat.completion" if self.chat else "text_completion", choices, usage=used, **extra)

    def _check_prompt_ids(self, result: GenerationResult) -> None:
        """A prompt sent as token ids travels as its text: the prompt's log probs are the sent
        ids' only if the engine's tokenizer gives them back (else the positions would shift)."""
        scored = result.prompt_logprobs
        if self.prompt_ids is not None and scored is not None and list(scored.token_ids) != self.prompt_ids:
            raise invalid(
                f"'prompt': the token ids ({len(self.prompt_ids)}) are not what the server's tokenizer makes of "
                f"their text ({len(scored.token_ids)} tokens); send the text, or ids the tokenizer gives back",
                "prompt",
            )

    def message(self, text: str, finish: str) -> tuple[dict, str]:
        """The assistant message and finish reason of one whole text answer (tool calls are
        openai_front/tool_responses.py's)."""
        return {"role": "assistant", "content": text}, finish

    def first_chunks(self, n: int) -> list[dict]:
        if not self.chat:
            return []
        return [
            self.envelope(
                "chat.completion.chunk",
                [{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None, "logprobs": None}],
            )
            for i in range(n)
        ]

    def chunk(self, chunk: StreamChunk, finish_reason: str | None) -> dict:
        index = chunk.sequence_index
        logprobs = self._logprobs(chunk.token_ids, chunk.log_probs, chunk.top_logprobs) if chunk.token_ids else None
        if self.chat:
            delta = {"content": chunk.text} if chunk.text else {}
            choice = {"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": logprobs}
            return self.envelope("chat.completion.chunk", [choice])
        choice = {"index": index, "text": chunk.text, "finish_reason": finish_reason, "logprobs": logprobs}
        return self.envelope("text_completion", [choice])

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> dict:
        obj = "chat.completion.chunk" if self.chat else "text_completion"
        return self.envelope(obj, [], usage=usage(prompt_tokens, completion_tokens))
