"""The LLM-API table the stand-in follows (contract/upstream/data/llmapi_1.2.1.json) and the
errors it raises in upstream's words; what the CPU engine cannot do is said as the stand-in's
own limitation, never in upstream's words."""

from __future__ import annotations

import inspect

from contract.upstream.llmapi import REQUIRED, Signature, llmapi

VERSION = "1.2.1"
API = llmapi(VERSION)


def error(row_id: str, **values) -> str:
    return API.errors[row_id].render(**values)


class StandinLimitation(NotImplementedError):
    def __init__(self, what: str) -> None:
        super().__init__(f"tensorrt_llm stand-in (CPU engine): {what}")


class ValidationError(ValueError):
    """pydantic's error for an LlmArgs keyword that is not a field (row llm.args.fields)."""


def signature_problems(func, expected: Signature) -> list[str]:
    """How `func`'s Python signature differs from the table's (names, order, defaults)."""
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "self"]
    got = [("**" + p.name) if p.kind is p.VAR_KEYWORD else p.name for p in params]
    if got != list(expected.names()):
        return [f"{expected.name}: parameters {got} != table {list(expected.names())}"]
    out = []
    for p, want in zip(params, expected.params):
        if p.kind is p.VAR_KEYWORD:
            continue
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        if default != want.default:
            out.append(f"{expected.name}({p.name}): default {default!r} != table {want.default!r}")
    return out


def check_signature(func, name: str) -> None:
    problems = signature_problems(func, API.signature(name))
    if problems:
        raise AssertionError("the stand-in does not follow the LLM API table: " + "; ".join(problems))
