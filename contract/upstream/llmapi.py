"""Typed view of TensorRT-LLM's LLM API (PyTorch backend) and NVIDIA's Triton `llmapi` model, per version.

Data: `data/llmapi_<version>.json`. The stand-in `tensorrt_llm` module checks its signatures against
`signature(...)`, builds its SamplingParams from `sampling_fields`, and raises the texts in `errors`:

    api = llmapi("1.2.1")
    api.signature("LLM.generate_async").names()       # ('inputs', 'sampling_params', ...)
    api.sampling_fields["max_tokens"].default          # 32
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contract.upstream.citation import Citation, Table, UpstreamTableError
from contract.upstream.rule_tables import Rule, RuleTables

SUPPORTED_VERSIONS = ("1.2.1", "1.3.0rc29")
REQUIRED = "<required>"  # a parameter without a default
_TABLES = RuleTables(
    "LLM API", "llmapi_", SUPPORTED_VERSIONS, structural=frozenset({"id", "topic", "rule", "cite", "locator"})
)


@dataclass(frozen=True)
class Param:
    name: str
    default: Any  # REQUIRED when the parameter has none
    annotation: str

    @property
    def required(self) -> bool:
        return self.default == REQUIRED


@dataclass(frozen=True)
class Signature:
    name: str  # e.g. "LLM.generate_async"
    params: tuple[Param, ...]
    citation: Citation

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise UpstreamTableError(f"{self.name} has no parameter {name!r}")


@dataclass(frozen=True)
class SamplingField:
    name: str
    default: Any
    annotation: str
    citation: Citation


@dataclass(frozen=True)
class ApiError:
    id: str
    type: str  # Python exception class name
    message: str  # template with {placeholders}
    citation: Citation

    def render(self, **values: Any) -> str:
        return self.message.format(**values)


@dataclass(frozen=True)
class LlmApi:
    version: str
    table: Table
    signatures: dict[str, Signature]
    sampling_fields: dict[str, SamplingField]
    errors: dict[str, ApiError]
    rules: dict[str, Rule]

    def signature(self, name: str) -> Signature:
        return _TABLES.find(self.signatures, name, self.version, "signature")

    def rule(self, rule_id: str) -> Rule:
        return _TABLES.find(self.rules, rule_id, self.version, "rule")


@lru_cache(maxsize=None)
def llmapi(version: str) -> LlmApi:
    table = _TABLES.load(version)
    signatures, fields, errors, rules = {}, {}, {}, {}
    for row in table.rows:
        cite = table.citation(row)
        rules[row["id"]] = _TABLES.rule(row, cite)
        if row["topic"] == "signature":
            params = tuple(Param(p["name"], p["default"], p["annotation"]) for p in row["params"])
            signatures[row["name"]] = Signature(row["name"], params, cite)
        elif row["topic"] == "sampling_field":
            fields[row["name"]] = SamplingField(row["name"], row["default"], row["annotation"], cite)
        if isinstance(row.get("error"), dict):
            errors[row["id"]] = ApiError(row["id"], row["error"]["type"], row["error"]["message"], cite)
    return LlmApi(version, table, signatures, fields, errors, rules)
