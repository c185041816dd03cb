"""What the front does with each parameter the official `openai` SDK may send to
`chat.completions.create` (as vLLM decides per parameter): honour it, accept and ignore it
(documented in docs/openai-api.md), or refuse it with a 400 `code: "unsupported_parameter"`
naming it.  A refused parameter is still accepted when it asks for the default (null, false,
an empty list or object, or the value named in `harmless`): clients that always send it work.

tests/unit/test_openai_params.py holds this table to the installed SDK's parameter list and to
the request schema, so a new SDK parameter fails a test until it is decided here."""

from __future__ import annotations

from dataclasses import dataclass

from openai_front.errors import unsupported

HONOUR, IGNORE, REFUSE = "honour", "accept and ignore", "refuse"


@dataclass(frozen=True)
class Policy:
    action: str
    why: str
    harmless: tuple = ()  # REFUSE: values that ask for what we do anyway


CHAT_PARAMETERS: dict[str, Policy] = {
    "model": Policy(HONOUR, "the served model or `<model>:<adapter>`"),
    "messages": Policy(HONOUR, "text content; images and audio parts are refused"),
    "max_tokens": Policy(HONOUR, ""),
    "max_completion_tokens": Policy(HONOUR, "wins over max_tokens"),
    "temperature": Policy(HONOUR, ""),
    "top_p": Policy(HONOUR, ""),
    "n": Policy(HONOUR, "1-16; 1 with tool_choice auto"),
    "stop": Policy(HONOUR, ""),
    "seed": Policy(HONOUR, ""),
    "stream": Policy(HONOUR, ""),
    "stream_options": Policy(HONOUR, "include_usage"),
    "presence_penalty": Policy(HONOUR, ""),
    "frequency_penalty": Policy(HONOUR, ""),
    "logprobs": Policy(HONOUR, "text answers (refused with tools unless tool_choice is none)"),
    "top_logprobs": Policy(HONOUR, "0-20"),
    "response_format": Policy(HONOUR, "guided decoding"),
    "tools": Policy(HONOUR, "function tools"),
    "tool_choice": Policy(HONOUR, "auto, none, required, a named function"),
    "parallel_tool_calls": Policy(HONOUR, "false: at most one call per answer"),
    "user": Policy(IGNORE, "an end-user id for abuse monitoring; nothing is monitored or logged"),
    "safety_identifier": Policy(IGNORE, "the successor of user; the same"),
    "store": Policy(IGNORE, "nothing is stored: answers cannot be retrieved later"),
    "metadata": Policy(IGNORE, "tags for stored completions; nothing is stored"),
    "service_tier": Policy(IGNORE, "one tier; responses carry no service_tier"),
    "reasoning_effort": Policy(IGNORE, "the served models do not reason before answering"),
    "verbosity": Policy(IGNORE, "the model's own length; bound it with max_tokens"),
    "prediction": Policy(IGNORE, "a latency hint only (predicted outputs); the answer is the same without it"),
    "prompt_cache_key": Policy(IGNORE, "prefix caching is automatic where the engine has it"),
    "prompt_cache_retention": Policy(IGNORE, "the same"),
    "prompt_cache_options": Policy(IGNORE, "the same"),
    "logit_bias": Policy(REFUSE, "the engines take no per-token bias"),
    "modalities": Policy(REFUSE, "text only", harmless=(["text"],)),
    "audio": Policy(REFUSE, "text only"),
    "web_search_options": Policy(REFUSE, "no web search"),
    "moderation": Policy(REFUSE, "no moderation runs; ignoring it would look like safety that is not there"),
    "functions": Policy(REFUSE, "deprecated: use tools"),
    "function_call": Policy(REFUSE, "deprecated: use tool_choice"),
}


def _asks_default(value) -> bool:
    return value is None or value is False or value == [] or value == {}


def check_policy(req) -> None:
    """Refuse the REFUSE parameters a request sets to something we would not do."""
    for name, policy in CHAT_PARAMETERS.items():
        if policy.action != REFUSE:
            continue
        value = getattr(req, name, None)
        if not _asks_default(value) and value not in policy.harmless:
            raise unsupported(name, policy.why)
