"""What guided decoding accepts: JSON-schema keywords the engines constrain decoding by.

Both engines compile a schema to a grammar with xgrammar (OpenVINO GenAI's
StructuredOutputConfig on CPU; TensorRT-LLM's guided decoding backend on GPU).  A keyword the
grammar cannot express would be dropped silently and the answer would not validate, so a
schema using anything outside this table is refused, naming the keyword and where it is.
The table is what tests/integration/test_features.py shows the CPU engine honour.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

# Keywords that constrain the output and are compiled into the grammar.
CONSTRAINING = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "$ref",
        "$defs",
        "definitions",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
# Annotations: no effect on what is valid.
ANNOTATIONS = frozenset({"title", "description", "$schema", "$id", "$comment", "default", "examples", "strict"})
# Keywords whose value is a map of sub-schemas / a list of sub-schemas / one sub-schema.
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties")


# Why every guide is compiled here first: OpenVINO GenAI 2026.4.1 compiles a request's grammar
# inside ContinuousBatchingPipeline.step(); a guide that does not compile makes that step
# raise, and every later step then raises "cannot be called when we are already in scheduling
# phase" (checked): one bad regex would take the engine down for everyone.  xgrammar (the
# compiler both engines embed) is pinned in requirements/lock.txt.
_XGRAMMAR_LOCATION = re.compile(r"^\[[^\]]*\]\s*\S+:\d+:\s*")


def _compilers() -> dict[str, Callable[[str], Any]]:
    import xgrammar

    grammar = xgrammar.Grammar
    return {
        "json": lambda _: grammar.builtin_json_grammar(),
        "json_schema": grammar.from_json_schema,
        "regex": grammar.from_regex,
        "ebnf_grammar": grammar.from_ebnf,
    }


def warm_up() -> None:
    """Import the compiler now (seconds, it loads torch) rather than on the first guided request."""
    _compilers()


def guide_problems(guide_type: str, guide: str) -> list[str]:
    """Why this guide cannot be enforced: unsupported schema keywords, or what the grammar
    compiler says about it; empty when it compiles."""
    if guide_type == "json_schema":
        problems = schema_problems(guide)
        if problems:
            return problems
    try:
        _compilers()[guide_type](guide)
    except RuntimeError as e:
        detail = _XGRAMMAR_LOCATION.sub("", str(e).strip().splitlines()[0])
        return [f"'guided_decoding_guide': the {guide_type} guide does not compile: {detail}"]
    return []


def schema_problems(guide: str) -> list[str]:
    """Why this JSON schema (text) cannot be enforced; empty when it can."""
    try:
        schema = json.loads(guide)
    except ValueError as e:
        return [f"'guided_decoding_guide' is not valid JSON: {e}"]
    problems: list[str] = []
    _walk(schema, "#", problems)
    return problems


def _walk(node: Any, where: str, problems: list[str]) -> None:
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        problems.append(f"'guided_decoding_guide': the schema at {where} is not an object")
        return
    for key, value in node.items():
        if key not in CONSTRAINING and key not in ANNOTATIONS:
            problems.append(
                f"'guided_decoding_guide': JSON-schema keyword '{key}' (at {where}) is not supported "
                f"by guided decoding; supported: {sorted(CONSTRAINING)}"
            )
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                _walk(sub, f"{where}/{key}/{name}", problems)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                _walk(sub, f"{where}/{key}/{i}", problems)
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            _walk(value, f"{where}/{key}", problems)
