"""Function calling: `tools` with `tool_choice` auto (or absent), none, required or a named
function.

- **Forced** (required / named): guided decoding.  The engine generates JSON constrained by
  the function's parameter schema (named) or by {"name": <one of them>, "arguments": <its
  schema>} (required), so the call always parses and its arguments validate.
- **Auto**: the functions are described to the model in its own tool format (contract/
  tool_formats.py: llama3_json, hermes, or the generic json fallback) and the model decides.
  The answer's first characters tell a call from text (`{` / `[` / `<|python_tag|>` /
  `<tool_call>`); once the model starts a call, the front cancels that generation and asks
  again with the call guided (same prompt, the call's schema), so a started call always
  completes as valid JSON naming one of the tools.  Text stays text.
- **None** (or no tools): text as usual; the tools are not described.

Both paths produce OpenAI deltas through `CallStream`: the call's id, type and name first, then
its arguments in fragments as the engine generates them; whole answers are those deltas joined,
so whole and streamed answers agree."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from client.types import ChatMessage, Guide
from contract import tool_formats
from openai_front.errors import ApiError, invalid, unsupported


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


# --- the formats ------------------------------------------------------------------------------
_LLAMA_ASK = (
    "Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
    "\"parameters\": dictionary of argument name and its value}. Do not use variables.\n\n"
)
# The generic fallback: Llama's request, softened so a small model still answers in text when no
# function fits (SmolLM2-135M with Llama's wording called a function even for "Say hi").
_JSON_ASK = (
    "You can use the following functions. If one of them answers the prompt, respond with a JSON for a "
    "function call with its proper arguments, in the format {\"name\": function name, \"parameters\": "
    "dictionary of argument name and its value}. Otherwise answer the prompt.\n\n"
)
_HERMES_ASK = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
    "with function signatures within <tools></tools> XML tags:\n<tools>\n{tools}\n</tools>\n\nFor each "
    "function call, return a json object with function name and arguments within <tool_call></tool_call> "
    "XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>"
)
_PYTHON_TAG = "<|python_tag|>"
_TOOL_CALL_OPEN, _TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
_FENCES = ("```json", "```")


@dataclass(frozen=True)
class ToolFormat:
    """How one model family is asked for calls, how its earlier calls are written back into the
    conversation, and how a call is told from text."""

    name: str
    key: str  # the key of the arguments in a call object the model is asked for

    def describe(self, messages: list[ChatMessage], tools: list[dict]) -> list[ChatMessage]:
        """The conversation with the functions described where the family's template puts them."""
        if self.name == tool_formats.HERMES:
            text = _HERMES_ASK.format(tools="\n".join(json.dumps(t, ensure_ascii=False) for t in tools))
            if messages and messages[0].role == "system":
                return [ChatMessage("system", f"{messages[0].content}\n\n{text}"), *messages[1:]]
            return [ChatMessage("system", text), *messages]
        # llama3_json and json: Llama 3.x's template puts them in the first user message.
        text = (
            (_LLAMA_ASK if self.name == tool_formats.LLAMA3_JSON else _JSON_ASK)
            + "\n\n".join(json.dumps(t, indent=4, ensure_ascii=False) for t in tools)
            + "\n\n"
        )
        out, done = [], False
        for m in messages:
            if m.role == "user" and not done:
                m, done = ChatMessage("user", text + m.content), True
            out.append(m)
        return out if done else [ChatMessage("user", text.rstrip()), *out]

    def render_calls(self, calls: list[dict]) -> str:
        """An assistant's earlier tool_calls as the model writes them."""
        objects = []
        for c in calls:
            function = c.get("function") or {}
            arguments = function.get("arguments") or "{}"
            try:
                arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError:
                pass
            objects.append({"name": function.get("name"), self.key: arguments})
        if self.name == tool_formats.JSON:
            # Not as JSON: a small model shown its earlier call repeats it instead of answering
            # from the tool's result.
            return " ".join(
                f"I called {o['name']} with {json.dumps(o[self.key], ensure_ascii=False)}." for o in objects
            )
        if self.name == tool_formats.HERMES:
            return "\n".join(
                f"{_TOOL_CALL_OPEN}\n{json.dumps(o, ensure_ascii=False)}\n{_TOOL_CALL_CLOSE}" for o in objects
            )
        return "; ".join(json.dumps(o, ensure_ascii=False) for o in objects)

    def call_start(self, text: str) -> bool | None:
        """True: the answer starts a call; False: it is text; None: too early to tell."""
        head = text.lstrip()
        if not head:
            return None
        if self.name == tool_formats.HERMES:
            if head.startswith(_TOOL_CALL_OPEN):
                return True
            return None if _TOOL_CALL_OPEN.startswith(head) else False
        for prefix in (_PYTHON_TAG, *_FENCES):
            if head.startswith(prefix):
                head = head[len(prefix) :].lstrip()
                break
            if prefix.startswith(head):
                return None
        if not head:
            return None
        return head[0] in "{["

    def parse(self, text: str) -> list[tuple[str, object]] | None:
        """A whole answer's calls as (name, arguments), or None when it is not calls."""
        body = text.strip()
        if self.name == tool_formats.HERMES:
            parts = [p.split(_TOOL_CALL_CLOSE)[0] for p in body.split(_TOOL_CALL_OPEN)[1:]]
        else:
            body = body.removeprefix(_PYTHON_TAG).strip()
            for fence in _FENCES:
                if body.startswith(fence):
                    body = body[len(fence) :].strip().removesuffix("```").strip()
                    break
            parts = [body]
        documents = []
        for part in parts:
            try:
                document = json.loads(part)
            except ValueError:
                try:  # Llama 3.x: several calls separated by ';'
                    document = [json.loads(p) for p in part.split(";") if p.strip()]
                except ValueError:
                    return None
            documents.extend(document if isinstance(document, list) else [document])
        calls = []
        for d in documents:
            if isinstance(d, dict) and isinstance(d.get("function"), dict):  # {"type": "function", "function": {...}}
                d = d["function"]
            if not isinstance(d, dict) or not isinstance(d.get("name"), str):
                return None
            arguments = d.get("parameters", d.get("arguments", {}))
            calls.append((d["name"], arguments))
        return calls or None


FORMATS = {
    name: ToolFormat(name, "arguments" if name == tool_formats.HERMES else "parameters")
    for name in (tool_formats.LLAMA3_JSON, tool_formats.HERMES, tool_formats.JSON)
}


# --- the plan of one request ------------------------------------------------------------------
@dataclass(frozen=True)
class ToolPlan:
    functions: dict[str, dict]  # name -> parameters schema
    named: str | None  # the one function tool_choice names; None: the model picks
    auto: bool = False  # tool_choice auto: the model decides whether to call
    format: ToolFormat = FORMATS[tool_formats.JSON]
    parallel: bool = True  # parallel_tool_calls
    tools: tuple = field(default=(), compare=False)  # the request's tool definitions, as sent

    def _call_schema(self, key: str) -> dict:
        return {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"name": {"const": name}, key: params},
                    "required": ["name", key],
                    "additionalProperties": False,
                }
                for name, params in self.functions.items()
            ]
        }

    def guide(self) -> Guide | None:
        """The forced call's guide; auto generates freely (see regeneration_guide)."""
        if self.auto:
            return None
        if self.named is not None:
            return Guide.json_schema(self.functions[self.named])
        return Guide.json_schema(self._call_schema("arguments"))

    def regeneration_guide(self, several: bool) -> Guide:
        """Auto, once the model started a call: the call (or a list of calls) in its format's keys."""
        one = self._call_schema(self.format.key)
        return Guide.json_schema({"type": "array", "items": one, "minItems": 1} if several and self.parallel else one)

    def messages(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        if self.auto:
            return self.format.describe(messages, list(self.tools))
        described = [{"name": name, "parameters": params} for name, params in self.functions.items()]
        ask = (
            f"Call the function {self.named} and answer only with its arguments as JSON."
            if self.named
            else "Call one of them and answer only with JSON {\"name\": ..., \"arguments\": {...}}."
        )
        return [ChatMessage("system", f"You can call these functions: {json.dumps(described)}. {ask}"), *messages]

    def call(self, text: str) -> dict:
        """A forced call's whole text -> one OpenAI tool call."""
        if self.named is not None:
            name, arguments = self.named, text
        else:
            document = json.loads(text)
            name, arguments = document["name"], json.dumps(document["arguments"], ensure_ascii=False)
        return {"id": new_call_id(), "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_plan(
    tools: list[dict] | None,
    tool_choice: str | dict | None,
    *,
    tool_format: str = tool_formats.JSON,
    model: str = "the model",
    parallel_tool_calls: bool | None = None,
) -> ToolPlan | None:
    if tool_choice not in (None, "none") and not tools:
        raise invalid("'tool_choice' needs 'tools'", "tool_choice")
    if not tools or tool_choice == "none":
        return None
    functions: dict[str, dict] = {}
    for i, tool in enumerate(tools):
        function = tool.get("function") if tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise invalid(f"'tools[{i}]' must be {{'type': 'function', 'function': {{'name': ..., ...}}}}", "tools")
        functions[function["name"]] = function.get("parameters") or {"type": "object", "properties": {}}
    parallel = parallel_tool_calls is not False
    if tool_choice in (None, "auto"):
        if tool_format not in FORMATS:
            why = (
                "its chat template has a tool-call format this server does not parse"
                if tool_format == tool_formats.UNSUPPORTED
                else "automatic tool calling is off for it"
            )
            raise unsupported(
                "tool_choice",
                f"'auto' with model {model!r}: {why}; send 'required' or "
                "{'type': 'function', 'function': {'name': ...}}",
            )
        return ToolPlan(functions, None, auto=True, format=FORMATS[tool_format], parallel=parallel, tools=tuple(tools))
    if tool_choice == "required":
        return ToolPlan(functions, None, parallel=parallel, tools=tuple(tools))
    if isinstance(tool_choice, str):
        raise invalid(
            f"'tool_choice' must be 'none', 'auto', 'required' or {{'type': 'function', 'function': "
            f"{{'name': ...}}}}, got {tool_choice!r}",
            "tool_choice",
        )
    name = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else None
    if name not in functions:
        raise invalid(f"'tool_choice' names {name!r}, which is not one of the tools {sorted(functions)}", "tool_choice")
    return ToolPlan(functions, name, tools=tuple(tools))


# --- one choice's text -> OpenAI deltas --------------------------------------------------------
_CALL_HEAD = re.compile(
    r'\s*(?:<\|python_tag\|>)?\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*'
    r'"(?:parameters|arguments)"\s*:\s*'
)


NO_TOOLS = ToolPlan(functions={}, named=None)  # a plain answer: nothing to call


class CallStream:
    """Text pieces of one choice in, OpenAI deltas out ({"content": ...} or {"tool_calls": [...]}).

    modes: "arguments" (a named forced call: the text is its arguments), "object" (one call
    object, its arguments streamed as they come), "buffer" (calls parsed when the answer ends),
    "auto" (text or a call: decided from the first characters), "content"."""

    def __init__(self, plan: ToolPlan | None, mode: str) -> None:
        """`plan` None: no tools (mode "content", the text passes through)."""
        self.plan, self.mode = plan or NO_TOOLS, mode
        self.text = ""  # everything fed
        self.calls = 0  # tool calls sent so far
        self.started_call = False  # auto: the model began a call (the caller may regenerate it guided)
        self._args_from: int | None = None  # object mode: where the arguments start in self.text
        self._sent = 0  # object mode: argument characters sent (from _args_from)

    def _named(self) -> str:
        assert self.plan.named is not None, "arguments mode is a named call's"
        return self.plan.named

    def _call_head(self, name: str) -> dict:
        self.calls += 1
        return {
            "tool_calls": [
                {
                    "index": self.calls - 1,
                    "id": new_call_id(),
                    "type": "function",
                    "function": {"name": name, "arguments": ""},
                }
            ]
        }

    def _fragment(self, text: str) -> dict:
        return {"tool_calls": [{"index": self.calls - 1, "function": {"arguments": text}}]}

    def feed(self, piece: str) -> list[dict]:
        self.text += piece
        if self.mode == "content":
            return [{"content": piece}] if piece else []
        if self.mode == "auto":
            decided = self.plan.format.call_start(self.text)
            if decided is None:
                return []
            if decided:
                self.started_call = True
                self.mode = "buffer"
                return []
            self.mode = "content"
            return [{"content": self.text}]
        if self.mode == "arguments":
            out = [self._call_head(self._named())] if self.calls == 0 else []
            return out + ([self._fragment(piece)] if piece else [])
        if self.mode == "object":
            out = []
            if self._args_from is None:
                head = _CALL_HEAD.match(self.text)
                if head is None:
                    return []
                self._args_from = head.end()
                out.append(self._call_head(json.loads(f'"{head.group(1)}"')))
            if self._sent == 0:  # the arguments start at their first non-space character
                while self._args_from < len(self.text) and self.text[self._args_from].isspace():
                    self._args_from += 1
            # hold back a closing '}' at the end: it may close the call object rather than the arguments
            ready = self.text[self._args_from :].rstrip()
            if ready.endswith("}"):
                ready = ready[:-1].rstrip()
            if len(ready) > self._sent:
                out.append(self._fragment(ready[self._sent :]))
                self._sent = len(ready)
            return out
        return []  # buffer

    def finish(self, reason: str) -> tuple[list[dict], str]:
        """The last deltas and the OpenAI finish_reason ("tool_calls" when a call completed;
        "length" when max_tokens cut the answer, whatever was sent)."""
        if self.mode == "content":
            return [], reason
        if self.mode == "auto":  # undecided to the end: text
            return ([{"content": self.text}] if self.text else []), reason
        if self.mode == "arguments":
            out = [self._call_head(self._named())] if self.calls == 0 else []
            return out, "tool_calls" if reason == "stop" else reason
        if self.mode == "object" and self._args_from is not None:
            rest = self.text[self._args_from :]
            if reason == "stop":
                end = rest.rfind("}")
                rest = rest[:end] if end >= 0 else rest
                rest = rest[: max(len(rest.rstrip()), self._sent)]
            rest = rest[self._sent :]
            return ([self._fragment(rest)] if rest else []), "tool_calls" if reason == "stop" else reason
        # buffer, or an object whose head never matched: parse the whole answer
        calls = self.plan.format.parse(self.text) if reason == "stop" else None
        if calls and all(name in self.plan.functions for name, _ in calls):
            if not self.plan.parallel:
                calls = calls[:1]
            out = []
            for name, arguments in calls:
                out.append(self._call_head(name))
                out.append(
                    self._fragment(
                        arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
                    )
                )
            return out, "tool_calls"
        return ([{"content": self.text}] if self.text else []), reason


def call_mode(plan: ToolPlan) -> str:
    if plan.auto:
        return "auto"
    return "arguments" if plan.named is not None else "object"


def assemble(deltas: list[dict]) -> dict:
    """A whole assistant message from one choice's deltas."""
    content, calls = "", {}  # type: str, dict[int, dict[str, Any]]
    for d in deltas:
        content += d.get("content") or ""
        for c in d.get("tool_calls", []):
            call = calls.setdefault(
                c["index"], {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
            )
            call["id"] = c.get("id") or call["id"]
            call["function"]["name"] += c.get("function", {}).get("name") or ""
            call["function"]["arguments"] += c.get("function", {}).get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    elif message["content"] is None:
        message["content"] = ""
    return message


__all__ = [
    "ApiError",
    "CallStream",
    "FORMATS",
    "ToolFormat",
    "ToolPlan",
    "assemble",
    "call_mode",
    "new_call_id",
    "tool_plan",
]
