"""Typed view of the C++ `tensorrt_llm` Triton backend's request semantics, per TensorRT-LLM version.

Data: `data/trtllm_backend_semantics_<version>.json` (every row cites upstream; see citation.py).
The stand-in for the C++ backend reads its rules from here instead of restating them:

    sem = backend_semantics("1.1.0")
    sem.error("error.queue_full").render(max_queue_size=8)   # the upstream message text
    sem.parameter("cancellation_check_period_ms").default    # 100
    sem.rule("stop.lookup").citation                          # where upstream says so
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contract.upstream.citation import Citation, Table
from contract.upstream.rule_tables import Rule, RuleTables

SUPPORTED_VERSIONS = ("1.1.0", "1.2.1")
# a rule's topics: request_id | stop | cancellation | error | limit | input | output | parameter
_TABLES = RuleTables(
    "backend semantics",
    "trtllm_backend_semantics_",
    SUPPORTED_VERSIONS,
    structural=frozenset({"id", "topic", "rule", "cite", "also"}),
)


@dataclass(frozen=True)
class ErrorRule:
    id: str
    code: str  # Triton error code the client sees (INTERNAL, ...)
    message: str  # template; {name} placeholders are filled by render()
    delivery: str  # enqueue_response (the request's only response) | final_response (ends a started request)
    where: str  # backend | executor
    citation: Citation

    def render(self, **values: Any) -> str:
        return self.message.format(**values)


@dataclass(frozen=True)
class RequestInput:
    name: str
    required: bool
    default: Any  # None: left unset, so the executor's own default applies
    executor_field: str
    dtype: str
    citation: Citation


@dataclass(frozen=True)
class ResponseOutput:
    name: str
    shape: str
    dtype: str
    when: str
    citation: Citation


@dataclass(frozen=True)
class ModelParameter:
    key: str
    type: str
    default: Any
    required: bool
    citation: Citation


@dataclass(frozen=True)
class BackendSemantics:
    version: str
    table: Table
    rules: dict[str, Rule]
    errors: dict[str, ErrorRule]
    inputs: dict[str, RequestInput]
    outputs: dict[str, ResponseOutput]
    parameters: dict[str, ModelParameter]

    def rule(self, rule_id: str) -> Rule:
        return _TABLES.find(self.rules, rule_id, self.version, "rule")

    def error(self, rule_id: str) -> ErrorRule:
        return _TABLES.find(self.errors, rule_id, self.version, "error rule")

    def parameter(self, key: str) -> ModelParameter:
        return _TABLES.find(self.parameters, key, self.version, "model parameter")

    def input(self, name: str) -> RequestInput:
        return _TABLES.find(self.inputs, name, self.version, "request input")


@lru_cache(maxsize=None)
def backend_semantics(version: str) -> BackendSemantics:
    table = _TABLES.load(version)
    rules, errors, inputs, outputs, parameters = {}, {}, {}, {}, {}
    for row in table.rows:
        cite = table.citation(row)
        rules[row["id"]] = _TABLES.rule(row, cite)
        if "message" in row and "code" in row:
            errors[row["id"]] = ErrorRule(
                row["id"],
                row["code"],
                row["message"],
                row.get("delivery", "final_response"),
                row.get("where", "backend"),
                cite,
            )
        if row["topic"] == "input":
            inputs[row["name"]] = RequestInput(
                row["name"],
                bool(row["required"]),
                row.get("default"),
                row["executor_field"],
                row.get("dtype", ""),
                cite,
            )
        elif row["topic"] == "output" and "name" in row:
            outputs[row["name"]] = ResponseOutput(row["name"], row["shape"], row["dtype"], row["when"], cite)
        elif row["topic"] == "parameter" and "key" in row:
            parameters[row["key"]] = ModelParameter(
                row["key"], row.get("type", ""), row.get("default"), bool(row.get("required", False)), cite
            )
    return BackendSemantics(version, table, rules, errors, inputs, outputs, parameters)
