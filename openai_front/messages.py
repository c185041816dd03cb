"""Anthropic's Messages API (`POST /v1/messages`) on the chat path.

As /v1/responses does (openai_front/responses.py), a request becomes a chat completion request
(openai_front.schemas.ChatCompletionRequest) and goes through the chat path's own translation
(openai_front.translate.chat_turn: the chat template, sampling, the tool
plan in the served model's tool format, guided decoding for forced calls), the model and LoRA
check and the priority header; the answer comes from openai_front/tool_responses.py's ToolTurn,
whose chat deltas become Anthropic content blocks (whole) or Anthropic's stream events here.
Stop sequences are matched in the front (openai_front/stop_sequences.py) so `stop_sequence`
names the one that stopped the answer.  Errors on /v1/messages have Anthropic's shape
(openai_front/errors.py anthropic_body; error_handlers.py and bodies.py pick it by path).  The
routes are openai_front/messages_routes.py's; a stream's events are MessageEvents (the Framing of
openai_front/streaming.py, the one SSE writer).

FIELDS says what the front does with each request field, and where the field is defined.
vLLM serves the same route by the same translation (vllm-project/vllm at commit
82df3f491008e46124f7afb5008c789dc7432515, vllm/entrypoints/anthropic/serving.py
`_convert_anthropic_to_openai_request`, `messages_full_converter`, `message_stream_converter`);
unlike it, this front names the stop sequence that matched, refuses images, documents,
`thinking` and a final assistant message (prefill) by name, and sends `is_error` tool results
as errors."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Callable, Iterable

from client.errors import ClientError, InvalidRequestError
from client.types import ChatMessage, SamplingParams
from contract import params as contract_params
from contract import tool_formats
from openai_front import responses
from openai_front.errors import ApiError, anthropic_body, api_message, invalid, unsupported
from openai_front.messages_schemas import MessagesRequest
from openai_front.other_apis import Renaming, chat_tools, joined_text
from openai_front.tool_responses import ToolTurn
from openai_front.tools import ToolPlan
from openai_front.translate import chat_from_fields

ROUTE = "/v1/messages"

# Where each field is defined.  SDK = the `anthropic` Python SDK's wire schema at the release the
# client-compat suite pins (requirements/client-compat-anthropic.lock), SDK0 = an older release
# that still has the sampling fields, DOCS = Anthropic's API reference.
SDK = "anthropic 2.15.0 (PyPI) anthropic/types/message_create_params.py"
SDK0 = "anthropic 0.125.0 (PyPI) anthropic/types/message_create_params.py (gone from 1.17.0 and 2.x)"
BLOCKS = "anthropic 2.15.0 anthropic/types/{text,tool_use,tool_result}_block_param.py"
TOOL = "anthropic 2.15.0 anthropic/types/tool_param.py"
CHOICE = "anthropic 2.15.0 anthropic/types/tool_choice_{auto,any,tool,none}_param.py"
HONOUR, IGNORE, REFUSE = "honour", "accept and ignore", "refuse"


@dataclass(frozen=True)
class Field:
    action: str
    why: str
    source: str = SDK


FIELDS: dict[str, Field] = {
    "model": Field(HONOUR, "the served model or `<model>:<adapter>`; another name: 404 not_found_error"),
    "max_tokens": Field(HONOUR, "required; 0 (Anthropic: pre-warm the prompt cache) is refused"),
    "messages": Field(
        HONOUR,
        "roles user, assistant (and system); content a string or text, tool_use and tool_result blocks; "
        "image, document, thinking and the server tools' blocks are refused naming the block; a final "
        "assistant message (prefill) is refused: preprocessing closes it",
        f"{SDK} and {BLOCKS}",
    ),
    "system": Field(HONOUR, "a string or text blocks: the system message first"),
    "stop_sequences": Field(
        HONOUR,
        f"matched by the front (openai_front/stop_sequences.py): stop_reason stop_sequence and the one matched; "
        f"at most {contract_params.MAX_STOP_WORDS}, none empty",
    ),
    "stream": Field(HONOUR, "Anthropic's events", "anthropic 2.15.0 anthropic/types/raw_message_stream_event.py"),
    "temperature": Field(HONOUR, "0-1", SDK0),
    "top_p": Field(HONOUR, "", SDK0),
    "top_k": Field(HONOUR, "", SDK0),
    "tools": Field(
        HONOUR,
        "custom tools {name, description, input_schema} (type absent or 'custom'); server tools are refused",
        TOOL,
    ),
    "tool_choice": Field(
        HONOUR, "auto (the default with tools), any, tool (named), none; disable_parallel_tool_use", CHOICE
    ),
    "metadata": Field(IGNORE, "user_id, for abuse detection: nothing is monitored or logged"),
    "service_tier": Field(IGNORE, "one tier"),
    "cache_control": Field(IGNORE, "prefix caching is automatic where the engine has it; the answer is the same"),
    "inference_geo": Field(IGNORE, "one place: this server"),
    "speed": Field(IGNORE, "one speed; the answer is the same"),
    "diagnostics": Field(IGNORE, "no prompt-cache diagnostics: the response's diagnostics is absent"),
    "user_profile_id": Field(IGNORE, "no user profiles"),
    "workspace_id": Field(IGNORE, "no workspaces"),
    "thinking": Field(REFUSE, "the served models do not think in a separate channel"),
    "output_config": Field(
        REFUSE, "no output formats or effort levels on /v1/messages; /v1/chat/completions has response_format"
    ),
    "container": Field(REFUSE, "no code-execution containers"),
    "mcp_servers": Field(REFUSE, "no MCP connector", "Anthropic API reference, Messages: mcp_servers (beta)"),
    "context_management": Field(
        REFUSE, "no context editing", "Anthropic API reference, Messages: context_management (beta)"
    ),
}

# The chat path's parameter names -> this request's (its errors name these).
_PARAMS = {
    "max_completion_tokens": "max_tokens",
    "stop": "stop_sequences",
    "parameters": "input_schema",
}
_CHOICES = {
    "'required'": "{'type': 'any'}",
    "{'type': 'function', 'function': {'name': ...}}": "{'type': 'tool', 'name': ...}",
    "tool_choice 'none'": "tool_choice {'type': 'none'}",
}


def _param(name: str) -> str:
    for chat, ours in _PARAMS.items():
        name = name.replace(chat, ours)
    return name


_NAMES = Renaming(_PARAMS, param=_param, param_at=lambda loc: loc or "messages", phrases=_CHOICES)


def _refusals(req: MessagesRequest) -> None:
    for name, field in FIELDS.items():
        if field.action == REFUSE and getattr(req, name, None) not in (None, {}, []):
            if name == "thinking" and (req.thinking or {}).get("type") == "disabled":
                continue
            raise unsupported(name, field.why)
    if req.max_tokens == 0:
        raise unsupported("max_tokens", "0: there is no prompt cache to pre-warm; send at least 1")
    stops = req.stop_sequences or []
    if len(stops) > contract_params.MAX_STOP_WORDS:
        raise invalid(
            f"'stop_sequences' holds at most {contract_params.MAX_STOP_WORDS}, got {len(stops)}", "stop_sequences"
        )
    for i, stop in enumerate(stops):
        if not stop:
            raise invalid(
                f"'stop_sequences[{i}]' is empty: a stop sequence needs at least one character", f"stop_sequences[{i}]"
            )


# --- content blocks -> chat messages ----------------------------------------------------------
_TEXT_KEYS = {"type", "text", "cache_control", "citations"}


def _text_block(block: dict, where: str) -> str:
    if not isinstance(block.get("text"), str):
        raise invalid(f"'{where}.text' must be a string", f"{where}.text")
    if block.get("citations"):
        raise unsupported(f"{where}.citations", "no citations: the server answers from text only")
    extra = set(block) - _TEXT_KEYS
    if extra:
        name = sorted(extra)[0]
        raise invalid(f"Unrecognized request argument supplied: {where}.{name}", f"{where}.{name}")
    return block["text"]


def _only_text(block, where: str) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind != "text":
        raise unsupported(f"{where}.type", f"block type {kind!r}: this server takes text blocks only")
    return _text_block(block, where)


def _texts(content, where: str) -> str:
    """A string or text blocks -> its text (system, tool_result content)."""
    return joined_text(content, where, "text blocks", _only_text)


def _tool_result(block: dict, where: str) -> dict:
    if not isinstance(block.get("tool_use_id"), str):
        raise invalid(f"'{where}.tool_use_id' must be a string", f"{where}.tool_use_id")
    text = _texts(block.get("content", ""), f"{where}.content")
    if block.get("is_error"):
        text = f"Error: {text}"  # the tool failed: the model is told so, not handed it as a result
    return {"role": "tool", "tool_call_id": block["tool_use_id"], "content": text}


def _tool_use(block: dict, where: str) -> dict:
    for key in ("id", "name"):
        if not isinstance(block.get(key), str):
            raise invalid(f"'{where}.{key}' must be a string", f"{where}.{key}")
    if not isinstance(block.get("input"), dict):
        raise invalid(f"'{where}.input' must be an object", f"{where}.input")
    return {
        "id": block["id"],
        "type": "function",
        "function": {"name": block["name"], "arguments": json.dumps(block["input"], ensure_ascii=False)},
    }


def chat_messages(req: MessagesRequest) -> list[dict]:
    """The request's system prompt and messages as chat messages: text blocks join into one
    message, tool_use blocks become the assistant's tool_calls, tool_result blocks tool messages."""
    out: list[dict] = []
    if req.system:
        out.append({"role": "system", "content": _texts(req.system, "system")})
    for i, message in enumerate(req.messages):
        where = f"messages[{i}]"
        role = message.get("role")
        if role not in ("user", "assistant", "system"):
            raise invalid(f"'{where}.role' must be one of user, assistant; got {role!r}", f"{where}.role")
        extra = set(message) - {"role", "content"}
        if extra:
            name = sorted(extra)[0]
            raise invalid(f"Unrecognized request argument supplied: {where}.{name}", f"{where}.{name}")
        content = message.get("content")
        if role == "system":
            out.append({"role": "system", "content": _texts(content, f"{where}.content")})
            continue
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        if not isinstance(content, list):
            raise invalid(f"'{where}.content' must be a string or a list of content blocks", f"{where}.content")
        texts, calls, results = [], [], []
        for j, block in enumerate(content):
            at = f"{where}.content[{j}]"
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                texts.append(_text_block(block, at))
            elif kind == "tool_use" and role == "assistant":
                calls.append(_tool_use(block, at))
            elif kind == "tool_result" and role == "user":
                results.append(_tool_result(block, at))
            else:
                raise unsupported(
                    f"{at}.type",
                    f"block type {kind!r} in a{'n' if role == 'assistant' else ''} {role} message: this server takes "
                    "text blocks, tool_use blocks from the assistant and tool_result blocks from the user",
                )
        out.extend(results)  # the results answer the previous turn's calls: they come first
        if role == "assistant":
            out.append({"role": "assistant", "content": "".join(texts) or None, "tool_calls": calls or None})
        elif texts:
            out.append({"role": "user", "content": "".join(texts)})
    if req.messages[-1].get("role") == "assistant":
        raise unsupported(
            f"messages[{len(req.messages) - 1}]",
            "a final assistant message (prefill): preprocessing closes the assistant's turn, so the "
            "answer would not continue it; end with a user message",
        )
    return out


_TOOL_KEYS = {
    "type",
    "name",
    "description",
    "input_schema",
    "cache_control",
    "strict",
    "eager_input_streaming",
    "input_examples",
    "defer_loading",
    "allowed_callers",
}


def _function(tool: dict, where: str) -> dict:
    if tool.get("type") not in (None, "custom"):
        raise unsupported(
            f"{where}.type", f"tool type {tool.get('type')!r}: this server runs no server tools; send custom tools"
        )
    if not isinstance(tool.get("name"), str):
        raise invalid(f"'{where}.name' must be a string", f"{where}.name")
    if not isinstance(tool.get("input_schema"), dict):
        raise invalid(f"'{where}.input_schema' must be a JSON schema object", f"{where}.input_schema")
    for name in ("input_examples", "defer_loading", "allowed_callers"):
        if tool.get(name) not in (None, False, []):
            raise unsupported(f"{where}.{name}", "the tool is described by its name, description and input_schema")
    extra = set(tool) - _TOOL_KEYS
    if extra:
        name = sorted(extra)[0]
        raise invalid(f"Unrecognized request argument supplied: {where}.{name}", f"{where}.{name}")
    function = {"name": tool["name"], "parameters": tool["input_schema"]}
    if tool.get("description"):
        function["description"] = tool["description"]
    return function


def _chat_tool_choice(choice: dict | None, has_tools: bool) -> tuple[str | dict | None, bool | None]:
    """-> (the chat request's tool_choice, parallel_tool_calls)."""
    if choice is None:
        return None, None
    kind = choice.get("type")
    parallel = False if choice.get("disable_parallel_tool_use") else None
    if kind == "auto":
        return ("auto" if has_tools else None), parallel
    if kind == "any":
        return "required", parallel
    if kind == "none":
        return "none", None
    if kind == "tool":
        if not isinstance(choice.get("name"), str):
            raise invalid("'tool_choice.name' must be a string", "tool_choice.name")
        return {"type": "function", "function": {"name": choice["name"]}}, parallel
    raise invalid(f"'tool_choice.type' must be one of auto, any, tool, none; got {kind!r}", "tool_choice.type")


def translate(
    req: MessagesRequest, *, tool_format: str = tool_formats.JSON, model: str = "the model"
) -> tuple[list[ChatMessage], SamplingParams, ToolPlan | None]:
    """-> (the chat messages, sampling, tool plan), through the chat path's own translation; its
    errors come back in this request's field names."""
    _refusals(req)
    messages = chat_messages(req)
    with _NAMES.spoken():
        tools = chat_tools(req.tools, _function)
        choice, parallel = _chat_tool_choice(req.tool_choice, bool(tools))
        fields = {
            "max_completion_tokens": req.max_tokens,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "top_k": req.top_k,
            "tools": tools,
            "tool_choice": choice,
            "parallel_tool_calls": parallel,
        }
        prompt, sampling, plan = chat_from_fields(req.model, messages, fields, tool_format=tool_format, model_ref=model)
    return prompt, sampling, plan


def engine_error(e: ClientError) -> ApiError:
    """An engine's refusal in this request's field names (Triton's prefixes dropped)."""
    if isinstance(e, InvalidRequestError):
        message, param = api_message(str(e), chat=True)
        return _NAMES.error(ApiError(400, message, param=param))
    return responses.engine_error(e)


# --- the answer ---------------------------------------------------------------------------------
def stop_reason(finish: str, matched: str | None) -> str:
    """The chat path's finish reason -> Anthropic's stop_reason (anthropic 2.15.0 stop_reason.py)."""
    if finish == "tool_calls":
        return "tool_use"
    if finish == "length":
        return "max_tokens"
    return "stop_sequence" if matched is not None else "end_turn"


def _input_of(arguments: str) -> dict:
    """A call's arguments as tool_use input; {} for arguments max_tokens cut (stop_reason says so)."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {"value": value}


def content_blocks(message: dict) -> list[dict]:
    """The chat path's whole assistant message -> Anthropic content blocks."""
    blocks: list[dict] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        blocks.append(
            {"type": "tool_use", "id": call["id"], "name": function["name"], "input": _input_of(function["arguments"])}
        )
    return blocks


def usage_of(turn: ToolTurn) -> dict:
    """The engine's counts of the answer returned (ToolTurn.usage)."""
    counted = turn.usage()
    return {"input_tokens": counted["prompt_tokens"], "output_tokens": counted["completion_tokens"]}


def message_body(
    message_id: str, model: str, blocks: list[dict], reason: str | None, matched: str | None, usage: dict
) -> dict:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": reason,
        "stop_sequence": matched if reason == "stop_sequence" else None,
        "usage": usage,
    }


def event(kind: str, **fields) -> str:
    """One server-sent event as Anthropic sends it: `event: <type>` and its JSON (the SDK skips
    events without the name: anthropic 2.15.0 anthropic/_streaming.py)."""
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields}, ensure_ascii=False)}\n\n"


class BlockEvents:
    """The chat path's deltas of one answer (ToolTurn.events) -> Anthropic's content block events,
    as they come: text streams into a text block (text_delta), each tool call into a tool_use
    block (input_json_delta)."""

    def __init__(self) -> None:
        self.index = -1
        self.open: str | None = None  # "text" | "tool_use"

    def _start(self, block: dict) -> list[str]:
        events = self.close()
        self.index += 1
        self.open = block["type"]
        return [*events, event("content_block_start", index=self.index, content_block=block)]

    def close(self) -> list[str]:
        if self.open is None:
            return []
        self.open = None
        return [event("content_block_stop", index=self.index)]

    def delta(self, delta: dict) -> list[str]:
        events: list[str] = []
        if delta.get("content"):
            if self.open != "text":
                events += self._start({"type": "text", "text": ""})
            events.append(
                event("content_block_delta", index=self.index, delta={"type": "text_delta", "text": delta["content"]})
            )
        for call in delta.get("tool_calls") or ():
            function = call.get("function") or {}
            if call.get("id"):  # a new call: its id and name come first
                events += self._start(
                    {"type": "tool_use", "id": call["id"], "name": function.get("name") or "", "input": {}}
                )
            if function.get("arguments") and self.open == "tool_use":
                events.append(
                    event(
                        "content_block_delta",
                        index=self.index,
                        delta={"type": "input_json_delta", "partial_json": function["arguments"]},
                    )
                )
        return events


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


class MessageEvents:
    """A streamed message (openai_front/streaming.py's Framing): Anthropic's events of the chat
    path's deltas; `matched` says which stop sequence stopped it (None: none did)."""

    def __init__(self, message_id: str, model: str, turn: ToolTurn, matched: Callable[[], str | None]) -> None:
        self.message_id, self.model, self.turn, self.matched = message_id, model, turn, matched
        self.blocks = BlockEvents()
        self.finish = "stop"

    def opening(self, first) -> Iterable[str]:
        usage = {"input_tokens": self.turn.prompt_tokens, "output_tokens": 0}
        return [
            event("message_start", message=message_body(self.message_id, self.model, [], None, None, usage)),
            event("ping"),
        ]

    def event(self, answered: tuple[int, dict | None, str | None]) -> Iterable[str]:
        _, delta, reason = answered
        self.finish = reason or self.finish
        return self.blocks.delta(delta or {})

    def failed(self, e: ClientError) -> Iterable[str]:
        return [event("error", error=anthropic_body(engine_error(e))["error"])]

    def closing(self) -> Iterable[str]:
        yield from self.blocks.close()
        matched = self.matched()
        reason = stop_reason(self.finish, matched)
        yield event(
            "message_delta",
            delta={"stop_reason": reason, "stop_sequence": matched if reason == "stop_sequence" else None},
            usage=usage_of(self.turn),
        )
        yield event("message_stop")
