"""What guided decoding accepts: JSON-schema keywords the engines constrain decoding by.

Both engines compile a schema to a grammar with xgrammar (OpenVINO GenAI's
StructuredOutputConfig on CPU; TensorRT-LLM's guided decoding backend on GPU).  A keyword the
grammar cannot express would be dropped silently and the answer would not validate, so a
schema using anything outside this table is refused, naming the keyword and where it is.
The table is what tests/integration/test_features.py shows the CPU engine honour.
"""

from __future__ import annotations

import json
from typing import Any

# Keywords that constrain the output and are compiled into the grammar.
CONSTRAINING = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "enum", "const",
    "anyOf", "oneOf", "$ref", "$defs", "definitions", "minLength", "maxLength", "pattern", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
})
# Annotations: no effect on what is valid.
ANNOTATIONS = frozenset({"title", "description", "$schema", "$id", "$comment", "default", "examples", "strict"})
# Keywords whose value is a map of sub-schemas / a list of sub-schemas / one sub-schema.
_SCHEMA_MAPS = ("properties", "$defs", "definitions")
_SCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties")


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
            problems.append(f"'guided_decoding_guide': JSON-schema keyword '{key}' (at {where}) is not supported "
                            f"by guided decoding; supported: {sorted(CONSTRAINING)}")
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            for name, sub in value.items():
                _walk(sub, f"{where}/{key}/{name}", problems)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for i, sub in enumerate(value):
                _walk(sub, f"{where}/{key}/{i}", problems)
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            _walk(value, f"{where}/{key}", problems)
