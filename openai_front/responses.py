"""OpenAI's Responses API (`/v1/responses`) on the chat path.

A request becomes a chat completion request (openai_front.schemas.ChatCompletionRequest) and
goes through the chat path's own translation (openai_front.translate.chat_turn: the chat
template, sampling, guided decoding for `text.format` and for function tools, the model and
LoRA check, the priority header), then to the ensemble like a chat completion.  The answer
comes from the chat path's openai_front/tool_responses.py ToolTurn (text, or tool calls the model
chose or was forced to make), whose chat deltas become
Responses output items and events here (ResponseEvents: the Framing of openai_front/streaming.py,
the one SSE writer); the routes are openai_front/responses_routes.py's.

- `input`: a string, or items: messages (roles system, developer, user, assistant; content a
  string or input_text/output_text parts), function_call and function_call_output items.
- `instructions` (a system message first; not carried over by `previous_response_id`),
  `max_output_tokens`, `temperature`, `top_p`, `text.format` (json_object, json_schema),
  `tools` (function tools) with `tool_choice` auto (the default with tools: the model decides,
  in the served model's tool format), none, required or a named function, `metadata`, `store`,
  `previous_response_id` (openai_front.response_store), streaming with OpenAI's events.
- Refused with a 400 naming the parameter: other input kinds (images, files, reasoning and
  item references), hosted tools, `include`, `reasoning`, `background`, `conversation`,
  `prompt`, `top_logprobs`, `truncation: auto`, `text.verbosity`.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Callable, Iterable

from client.errors import ClientError, InvalidRequestError, RequestTimeout, ServerUnavailable
from client.types import ChatMessage, SamplingParams
from contract import names, tool_formats
from openai_front.errors import ApiError, invalid, param_of, unsupported
from openai_front.other_apis import Renaming, chat_tools, joined_text
from openai_front.responses_schemas import ResponseCreateRequest
from openai_front.tool_responses import ToolTurn
from openai_front.tools import ToolPlan
from openai_front.translate import chat_from_fields

ROUTE = "/v1/responses"
MAX_METADATA_KEYS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512  # OpenAI's bounds

# The chat path's parameter names -> the Responses request's (its errors name these).
_PARAMS = {
    "messages": "input",
    "prompt": "input",
    "text_input": "input",
    "max_completion_tokens": "max_output_tokens",
    "max_tokens": "max_output_tokens",
    "response_format": "text.format",
    "logprobs": "top_logprobs",
    "top_logprobs": "top_logprobs",
}


def _param(name: str) -> str:
    end = min((i for i in (name.find("."), name.find("[")) if i >= 0), default=len(name))
    return _PARAMS.get(name[:end], name[:end]) + name[end:]


_NAMES = Renaming(
    _PARAMS,
    param=_param,
    param_at=lambda loc: _param(loc) or "input",
    phrases={"{'type': 'function', 'function': {'name': ...}}": "{'type': 'function', 'name': ...}"},
)


# Triton names the model that refused a request ("in ensemble 'ensemble', ..."): not a parameter.
_MODELS = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str) and "." not in v}


def _engine_param(message: str) -> str | None:
    """The request parameter an engine's refusal names (the first quoted name that is not a model's)."""
    for quoted in re.findall(r"'([a-z_]+)'", message):
        if quoted not in _MODELS:
            named = param_of(f"'{quoted}'", chat=True)
            return None if named is None else _param(named)
    return None


def engine_error(e: ClientError) -> ApiError:
    if isinstance(e, InvalidRequestError):
        return ApiError(400, str(e), param=_engine_param(str(e)))
    if isinstance(e, ServerUnavailable):
        return ApiError(503, f"the model server is unavailable: {e}", type_="server_error")
    if isinstance(e, RequestTimeout):
        return ApiError(504, str(e), type_="server_error")
    return ApiError(500, str(e), type_="server_error")


# --- input items ------------------------------------------------------------------------
_TEXT_PARTS = {"input_text", "output_text", "text"}


def _part_text(part, where: str) -> str:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
        return part["text"]
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return part["refusal"]
    raise unsupported(where, f"content part type {kind!r}: this server takes text only (input_text, output_text)")


def _text_of(content, where: str) -> str:
    """A message's content (a string or parts) -> its text; non-text parts are refused."""
    return joined_text(content, where, "content parts", _part_text)


def input_items(req: ResponseCreateRequest) -> list[dict]:
    """The request's input as normalized items (what a stored response's conversation keeps)."""
    if isinstance(req.input, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": req.input}]}]
    items = []
    for i, item in enumerate(req.input):
        where = f"input[{i}]"
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            if role not in ("system", "developer", "user", "assistant"):
                raise invalid(
                    f"'{where}.role' must be one of system, developer, user, assistant; got {role!r}", f"{where}.role"
                )
            text = _text_of(item.get("content"), f"{where}.content")
            part = "output_text" if role == "assistant" else "input_text"
            items.append({"type": "message", "role": role, "content": [{"type": part, "text": text}]})
        elif kind == "function_call":
            for field in ("call_id", "name", "arguments"):
                if not isinstance(item.get(field), str):
                    raise invalid(f"'{where}.{field}' must be a string", f"{where}.{field}")
            items.append(
                {
                    "type": "function_call",
                    "call_id": item["call_id"],
                    "name": item["name"],
                    "arguments": item["arguments"],
                }
            )
        elif kind == "function_call_output":
            if not isinstance(item.get("call_id"), str):
                raise invalid(f"'{where}.call_id' must be a string", f"{where}.call_id")
            output = _text_of(item.get("output"), f"{where}.output")
            items.append({"type": "function_call_output", "call_id": item["call_id"], "output": output})
        else:
            raise unsupported(
                f"{where}.type",
                f"input item type {kind!r}: this server takes message, function_call and function_call_output items",
            )
    return items


def chat_messages(items: list[dict] | tuple[dict, ...]) -> list[dict]:
    """Conversation items -> chat messages: a function call is an assistant turn with tool
    calls (consecutive calls share one turn), its output a tool message."""
    messages: list[dict] = []
    for item in items:
        kind = item["type"]
        if kind == "message":
            messages.append({"role": item["role"], "content": _text_of(item["content"], "input")})
        elif kind == "function_call":
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls"):
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
    return messages


# --- tools and text.format -> the chat request's fields ------------------------------------
def _function(tool: dict, where: str) -> dict:
    if tool.get("type") != "function":
        raise unsupported(
            f"{where}.type", f"tool type {tool.get('type')!r}: this server runs no hosted tools; send function tools"
        )
    if not isinstance(tool.get("name"), str):
        raise invalid(f"'{where}.name' must be a string", f"{where}.name")
    return {k: tool[k] for k in ("name", "description", "parameters", "strict") if tool.get(k) is not None}


def _chat_tool_choice(choice: str | dict | None) -> str | dict | None:
    if choice is None or isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise unsupported("tool_choice", f"{choice!r}: send none, auto, required or {{'type': 'function', 'name': ...}}")


def _response_format(text: dict | None) -> dict | None:
    """`text` -> the chat request's response_format (json_schema's fields sit one level up here)."""
    if not text:
        return None
    if text.get("verbosity") not in (None, "medium"):
        raise unsupported("text.verbosity")
    extra = set(text) - {"format", "verbosity"}
    if extra:
        raise invalid(f"unrecognized request argument supplied: text.{sorted(extra)[0]}", f"text.{sorted(extra)[0]}")
    fmt = text.get("format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise invalid("'text.format' must be an object", "text.format")
    if fmt.get("type") == "json_schema":
        if not isinstance(fmt.get("schema"), dict):
            raise invalid("'text.format.schema' must be a JSON schema object", "text.format.schema")
        return {
            "type": "json_schema",
            "json_schema": {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt},
        }
    return {"type": fmt.get("type")}


def _refusals(req: ResponseCreateRequest) -> None:
    if req.include:
        raise unsupported("include", f"{req.include}: this server adds nothing to its output items")
    if req.reasoning and any(v is not None for v in req.reasoning.values()):
        raise unsupported("reasoning", "the served model does not reason in a separate channel")
    if req.background:
        raise unsupported("background", "stream the response instead")
    if req.conversation is not None:
        raise unsupported("conversation", "use 'previous_response_id'")
    if req.prompt is not None:
        raise unsupported("prompt", "this server keeps no prompt templates")
    if req.top_logprobs:
        raise unsupported("top_logprobs", "on /v1/responses; /v1/chat/completions returns log probs")
    if req.truncation == "auto":
        raise unsupported("truncation", "'auto': an input over the context window is refused, never cut")
    if req.metadata is not None:
        if len(req.metadata) > MAX_METADATA_KEYS:
            raise invalid(f"'metadata' holds at most {MAX_METADATA_KEYS} keys, got {len(req.metadata)}", "metadata")
        for key, value in req.metadata.items():
            if len(key) > MAX_METADATA_KEY or len(value) > MAX_METADATA_VALUE:
                raise invalid(
                    f"'metadata' keys hold at most {MAX_METADATA_KEY} characters and values "
                    f"{MAX_METADATA_VALUE}; {key[:MAX_METADATA_KEY]!r} is longer",
                    "metadata",
                )


def translate(
    req: ResponseCreateRequest,
    history: tuple[dict, ...],
    *,
    tool_format: str = tool_formats.JSON,
    model: str = "the model",
) -> tuple[list[dict], list[ChatMessage], SamplingParams, ToolPlan | None]:
    """-> (this request's input items, the chat messages, sampling, tool plan), through the
    chat path's own translation; its errors come back in this request's parameter names."""
    _refusals(req)
    items = input_items(req)
    messages = chat_messages([*history, *items])
    if req.instructions:
        messages.insert(0, {"role": "system", "content": req.instructions})
    if not messages:
        raise invalid("'input' is empty: send a string or at least one input item", "input")
    with _NAMES.spoken():
        tools, choice = chat_tools(req.tools, _function), _chat_tool_choice(req.tool_choice)
        fields = {
            "max_completion_tokens": req.max_output_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "tools": tools,
            "tool_choice": choice,
            "parallel_tool_calls": req.parallel_tool_calls,
            "response_format": _response_format(req.text),
            "seed": req.seed,
            "top_k": req.top_k,
            "stop": req.stop,
            "repetition_penalty": req.repetition_penalty,
            "priority": req.priority,
            "user": req.user,
        }
        prompt, sampling, plan = chat_from_fields(req.model, messages, fields, tool_format=tool_format, model_ref=model)
    return items, prompt, sampling, plan


# --- the response object ------------------------------------------------------------------
def _usage(input_tokens: int, output_tokens: int) -> dict:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _hex_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class ResponseBuilder:
    """One response's id, echoed request fields and output items."""

    def __init__(self, req: ResponseCreateRequest, stored: bool) -> None:
        self.req, self.stored = req, stored
        self.id = _hex_id("resp")
        self.created_at = int(time.time())

    def body(self, status: str, output: list[dict], usage: dict | None = None, *, error: dict | None = None) -> dict:
        req = self.req
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": req.instructions,
            "max_output_tokens": req.max_output_tokens,
            "metadata": req.metadata or {},
            "model": req.model,
            "output": output,
            "parallel_tool_calls": req.parallel_tool_calls is not False,
            "previous_response_id": req.previous_response_id,
            "reasoning": None,
            "store": self.stored,
            "temperature": req.temperature,
            "text": {"format": (req.text or {}).get("format") or {"type": "text"}},
            "tool_choice": req.tool_choice or ("auto" if req.tools else "none"),
            "tools": req.tools or [],
            "top_p": req.top_p,
            "truncation": "disabled",
            "usage": usage,
            "user": req.user,
        }

    @staticmethod
    def message_item(text: str, status: str, item_id: str | None = None) -> dict:
        return {
            "id": item_id or _hex_id("msg"),
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": [ResponseBuilder.text_part(text)],
        }

    @staticmethod
    def call_item(call_id: str, name: str, arguments: str, status: str, item_id: str | None = None) -> dict:
        return {
            "id": item_id or _hex_id("fc"),
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    @staticmethod
    def text_part(text: str) -> dict:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def output_items(self, message: dict, finish: str) -> list[dict]:
        """The chat path's whole assistant message (text and/or tool calls) -> output items."""
        status = status_of(finish)
        items = []
        if message.get("content") is not None or not message.get("tool_calls"):
            items.append(self.message_item(message.get("content") or "", status))
        for call in message.get("tool_calls") or ():
            function = call["function"]
            items.append(self.call_item(call["id"], function["name"], function["arguments"], status))
        return items


def status_of(finish: str) -> str:
    return "incomplete" if finish == "length" else "completed"


def response_usage(chat_usage: dict) -> dict:
    return _usage(chat_usage["prompt_tokens"], chat_usage["completion_tokens"])


class EventWriter:
    """SSE events as OpenAI sends them: `event: <type>` and its JSON, numbered."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, type_: str, **fields) -> str:
        data = {"type": type_, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return f"event: {type_}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _message_opening(emit: EventWriter, index: int, item_id: str) -> list[str]:
    return [
        emit(
            "response.output_item.added",
            output_index=index,
            item={"id": item_id, "type": "message", "role": "assistant", "status": "in_progress", "content": []},
        ),
        emit(
            "response.content_part.added",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part=ResponseBuilder.text_part(""),
        ),
    ]


def _message_closing(emit: EventWriter, index: int, item: dict) -> list[str]:
    part = item["content"][0]
    return [
        emit(
            "response.output_text.done",
            item_id=item["id"],
            output_index=index,
            content_index=0,
            text=part["text"],
            logprobs=[],
        ),
        emit("response.content_part.done", item_id=item["id"], output_index=index, content_index=0, part=part),
        emit("response.output_item.done", output_index=index, item=item),
    ]


class OutputEvents:
    """The chat path's deltas of one answer (ToolTurn.events) -> Responses events, as they come:
    text streams into a message item (response.output_text.delta), each tool call into a
    function_call item (response.function_call_arguments.delta); `output` holds the items done."""

    def __init__(self, emit: EventWriter) -> None:
        self.emit = emit
        self.output: list[dict] = []
        self._open: dict | None = None  # the item being streamed: its id, kind and text so far

    def delta(self, delta: dict) -> list[str]:
        emit, events = self.emit, []
        if delta.get("content"):
            if self._open is None or self._open["type"] != "message":
                events += self._close("completed")
                self._open = {"type": "message", "id": _hex_id("msg"), "text": ""}
                events += _message_opening(emit, len(self.output), self._open["id"])
            self._open["text"] += delta["content"]
            events.append(
                emit(
                    "response.output_text.delta",
                    item_id=self._open["id"],
                    output_index=len(self.output),
                    content_index=0,
                    delta=delta["content"],
                    logprobs=[],
                )
            )
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            if call.get("id"):  # a new call: its id and name come first
                events += self._close("completed")
                self._open = {
                    "type": "function_call",
                    "id": _hex_id("fc"),
                    "call_id": call["id"],
                    "name": function.get("name") or "",
                    "arguments": "",
                }
                item = ResponseBuilder.call_item(call["id"], self._open["name"], "", "in_progress", self._open["id"])
                events.append(emit("response.output_item.added", output_index=len(self.output), item=item))
            if function.get("arguments") and self._open is not None:
                self._open["arguments"] += function["arguments"]
                events.append(
                    emit(
                        "response.function_call_arguments.delta",
                        item_id=self._open["id"],
                        output_index=len(self.output),
                        delta=function["arguments"],
                    )
                )
        return events

    def _close(self, status: str) -> list[str]:
        opened, index = self._open, len(self.output)
        if opened is None:
            return []
        self._open = None
        if opened["type"] == "message":
            item = ResponseBuilder.message_item(opened["text"], status, opened["id"])
            events = _message_closing(self.emit, index, item)
        else:
            item = ResponseBuilder.call_item(
                opened["call_id"], opened["name"], opened["arguments"], status, opened["id"]
            )
            events = [
                self.emit(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=item["name"],
                    arguments=item["arguments"],
                ),
                self.emit("response.output_item.done", output_index=index, item=item),
            ]
        self.output.append(item)
        return events

    def finish(self, finish: str) -> list[str]:
        events = self._close(status_of(finish))
        if not self.output:  # nothing generated: an empty message, as a whole response has
            self._open = {"type": "message", "id": _hex_id("msg"), "text": ""}
            events += _message_opening(self.emit, 0, self._open["id"]) + self._close(status_of(finish))
        return events


class ResponseEvents:
    """A streamed response (openai_front/streaming.py's Framing): text and tool calls stream as the
    chat path yields them (a call the model chose is recognised in its first characters;
    openai_front/tools.py); `done` is given the whole response at the end."""

    def __init__(self, builder: ResponseBuilder, turn: ToolTurn, done: Callable[[dict], None]) -> None:
        self.builder, self.turn, self.done = builder, turn, done
        self.emit = EventWriter()
        self.output = OutputEvents(self.emit)
        self.finish = "stop"

    def opening(self, first) -> Iterable[str]:
        in_progress = self.builder.body("in_progress", [])
        return [
            self.emit("response.created", response=in_progress),
            self.emit("response.in_progress", response=in_progress),
        ]

    def event(self, event: tuple[int, dict | None, str | None]) -> Iterable[str]:
        _, delta, reason = event
        if reason is not None:
            self.finish = reason
        return self.output.delta(delta) if delta is not None else []

    def failed(self, e: ClientError) -> Iterable[str]:
        error = engine_error(e)
        failure = {"code": "server_error" if error.status >= 500 else "invalid_prompt", "message": error.message}
        return [
            self.emit("error", code=error.code or error.type, message=error.message, param=error.param),
            self.emit("response.failed", response=self.builder.body("failed", [], error=failure)),
        ]

    def closing(self) -> Iterable[str]:
        yield from self.output.finish(self.finish)
        body = self.builder.body(status_of(self.finish), self.output.output, response_usage(self.turn.usage()))
        self.done(body)
        yield self.emit("response.completed" if body["status"] == "completed" else "response.incomplete", response=body)
