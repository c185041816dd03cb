"""Function calling as guided decoding: `tools` + `tool_choice` "required" or a named
function.  The engine generates JSON constrained by the function's parameter schema (one
function) or by {"name": <one of them>, "arguments": <its schema>} (several), so the call
always parses and its arguments validate; the answer is OpenAI's `tool_calls`.  "auto" (the
model decides whether to call) is refused: the default model has no reliable tool-call format
to tell a call from text.  "none" (or no tools) generates text as usual."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from client.types import ChatMessage, Guide
from openai_front.errors import invalid, unsupported


@dataclass(frozen=True)
class ToolPlan:
    functions: dict[str, dict]  # name -> parameters schema
    named: str | None  # the one function tool_choice names; None: the model picks (required)

    def guide(self) -> Guide:
        if self.named is not None:
            return Guide.json_schema(self.functions[self.named])
        return Guide.json_schema({"anyOf": [
            {"type": "object", "properties": {"name": {"const": name}, "arguments": params},
             "required": ["name", "arguments"], "additionalProperties": False}
            for name, params in self.functions.items()]})

    def system_message(self) -> ChatMessage:
        described = [{"name": name, "parameters": params} for name, params in self.functions.items()]
        ask = (f"Call the function {self.named} and answer only with its arguments as JSON."
               if self.named else "Call one of them and answer only with JSON {\"name\": ..., \"arguments\": {...}}.")
        return ChatMessage("system", f"You can call these functions: {json.dumps(described)}. {ask}")

    def call(self, text: str) -> dict:
        """The engine's JSON -> one OpenAI tool call."""
        if self.named is not None:
            name, arguments = self.named, text
        else:
            document = json.loads(text)
            name, arguments = document["name"], json.dumps(document["arguments"], ensure_ascii=False)
        return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                "function": {"name": name, "arguments": arguments}}


def tool_plan(tools: list[dict] | None, tool_choice: str | dict | None) -> ToolPlan | None:
    if not tools or tool_choice == "none":
        return None
    functions: dict[str, dict] = {}
    for i, tool in enumerate(tools):
        function = tool.get("function") if tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise invalid(f"'tools[{i}]' must be {{'type': 'function', 'function': {{'name': ..., ...}}}}", "tools")
        functions[function["name"]] = function.get("parameters") or {"type": "object", "properties": {}}
    if tool_choice in (None, "auto"):
        raise unsupported("tool_choice", "'auto' (the model has no reliable tool-call format); send 'required' "
                                         "or {'type': 'function', 'function': {'name': ...}}")
    if tool_choice == "required":
        return ToolPlan(functions, None)
    name = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else None
    if name not in functions:
        raise invalid(f"'tool_choice' names {name!r}, which is not one of the tools {sorted(functions)}", "tool_choice")
    return ToolPlan(functions, name)
