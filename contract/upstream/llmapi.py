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

from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table

SUPPORTED_VERSIONS = ("1.2.1", "1.3.0rc29")
REQUIRED = "<required>"  # a parameter without a default


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
class ApiRule:
    id: str
    topic: str
    rule: str
    citation: Citation
    extra: dict[str, Any]


@dataclass(frozen=True)
class LlmApi:
    version: str
    table: Table
    signatures: dict[str, Signature]
    sampling_fields: dict[str, SamplingField]
    errors: dict[str, ApiError]
    rules: dict[str, ApiRule]

    def signature(self, name: str) -> Signature:
        try:
            return self.signatures[name]
        except KeyError:
            raise UpstreamTableError(
                f"TensorRT-LLM {self.version}: no signature {name!r} in the LLM API table"
            ) from None

    def rule(self, rule_id: str) -> ApiRule:
        try:
            return self.rules[rule_id]
        except KeyError:
            raise UpstreamTableError(f"TensorRT-LLM {self.version}: no rule {rule_id!r} in the LLM API table") from None


_STRUCTURAL = {"id", "topic", "rule", "cite", "locator"}


@lru_cache(maxsize=None)
def llmapi(version: str) -> LlmApi:
    if version not in SUPPORTED_VERSIONS:
        raise UpstreamTableError(f"no LLM API table for TensorRT-LLM {version} (have {', '.join(SUPPORTED_VERSIONS)})")
    table = load_table(f"llmapi_{version}")
    signatures, fields, errors, rules = {}, {}, {}, {}
    for row in table.rows:
        cite = table.citation(row)
        rules[row["id"]] = ApiRule(
            row["id"], row["topic"], row["rule"], cite, {k: v for k, v in row.items() if k not in _STRUCTURAL}
        )
        if row["topic"] == "signature":
            params = tuple(Param(p["name"], p["default"], p["annotation"]) for p in row["params"])
            signatures[row["name"]] = Signature(row["name"], params, cite)
        elif row["topic"] == "sampling_field":
            fields[row["name"]] = SamplingField(row["name"], row["default"], row["annotation"], cite)
        if isinstance(row.get("error"), dict):
            errors[row["id"]] = ApiError(row["id"], row["error"]["type"], row["error"]["message"], cite)
    return LlmApi(version, table, signatures, fields, errors, rules)
