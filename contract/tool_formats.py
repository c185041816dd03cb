"""Which tool-call format a checkpoint speaks, read from its own chat template.

A pure function of the template text, so the engine build can record it beside the chat
template (build.json `tool_call_format`) and the OpenAI front can derive it when no record
exists.  The formats (the front's openai_front/tool_calls.py prompts and parses each):

- `llama3_json`: Llama 3.1/3.2/3.3.  The template describes the functions in the first user
  message and asks for `{"name": function name, "parameters": {...}}`; a call may start with
  `<|python_tag|>`; several calls are separated by `;`.
- `hermes`: Qwen2.5, Hermes, SmolLM3 and others: `<tool_call>{"name": ..., "arguments": ...}</tool_call>`,
  one block per call (parallel calls: several blocks).
- `json`: templates with no tool format at all (the default model SmolLM2-135M-Instruct's
  template renders role and content only).  The front prompts as Llama 3.x does and
  recognises a JSON object `{"name": ..., "parameters"|"arguments": ...}` (or a list of them).
- `unsupported`: the template renders tools or tool calls in a format the front does not
  parse (Mistral's `[TOOL_CALLS]`, for instance).  Automatic tool calling is refused; a
  forced call (guided decoding) still works.
"""

from __future__ import annotations

import json
from pathlib import Path

LLAMA3_JSON = "llama3_json"
HERMES = "hermes"
JSON = "json"
UNSUPPORTED = "unsupported"
NONE = "none"  # set by hand: no automatic tool calling for this model
FORMATS = (LLAMA3_JSON, HERMES, JSON, UNSUPPORTED, NONE)


def detect(chat_template: str | None) -> str:
    """The tool-call format of a chat template (Jinja text)."""
    template = chat_template or ""
    if "<|python_tag|>" in template or '"parameters": dictionary of argument name' in template:
        return LLAMA3_JSON
    if "<tool_call>" in template:
        return HERMES
    if "tool_calls" in template or "tools" in template:
        return UNSUPPORTED
    return JSON


def read_chat_template(directory: Path) -> str | None:
    """The chat template of a checkpoint or engine directory: chat_template.jinja, else
    tokenizer_config.json's `chat_template` (a string, or named templates: "tool_use" first)."""
    directory = Path(directory)
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    config = directory / "tokenizer_config.json"
    if not config.is_file():
        return None
    template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("tool_use") or named.get("default")
    return template if isinstance(template, str) else None


def recorded_or_detected(directory: Path) -> str:
    """build.json's `tool_call_format` when the build recorded one, else detected from the
    directory's chat template."""
    record = Path(directory) / "build.json"
    if record.is_file():
        recorded = json.loads(record.read_text(encoding="utf-8")).get("tool_call_format")
        if recorded in FORMATS:
            return recorded
    return detect(read_chat_template(directory))
