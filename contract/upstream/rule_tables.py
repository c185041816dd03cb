"""What the backend-semantics and LLM API tables share: one table file per TensorRT-LLM version
(`data/<prefix><version>.json`), refused for a version not listed, whose every row is a cited rule
(id, topic, upstream's behaviour in words, the row's other fields as `extra`), and the lookups of
their views, which name the version and the table of what they do not find.

    tables = RuleTables("LLM API", "llmapi_", ("1.2.1",), structural=frozenset({"id", ...}))
    table = tables.load("1.2.1")
    rules = {row["id"]: tables.rule(row, table.citation(row)) for row in table.rows}
    tables.find(rules, "x", "1.2.1", "rule")
    # UpstreamTableError: TensorRT-LLM 1.2.1: no rule 'x' in the LLM API table
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, TypeVar

from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table

V = TypeVar("V")


@dataclass(frozen=True)
class Rule:
    id: str
    topic: str  # what the row is about (the table's own topics)
    rule: str  # upstream's behaviour, in words
    citation: Citation
    extra: dict[str, Any]  # the row's structured fields (key, default, formula, ...)


@dataclass(frozen=True)
class RuleTables:
    what: str  # the table as its errors name it: "backend semantics", "LLM API"
    prefix: str  # data/<prefix><version>.json
    versions: tuple[str, ...]  # the versions there is a table for
    structural: frozenset[str]  # a row's keys that are not its rule's extra fields

    def load(self, version: str) -> Table:
        """The table of `version`; refused for one not in `versions`."""
        if version not in self.versions:
            raise UpstreamTableError(
                f"no {self.what} table for TensorRT-LLM {version} (have {', '.join(self.versions)})"
            )
        return load_table(self.prefix + version)

    def rule(self, row: Mapping[str, Any], citation: Citation) -> Rule:
        """The row as a rule: its id, topic and words, and its other fields."""
        extra = {k: v for k, v in row.items() if k not in self.structural}
        return Rule(row["id"], row["topic"], row["rule"], citation, extra)

    def find(self, mapping: Mapping[str, V], key: str, version: str, kind: str) -> V:
        """`mapping[key]`, or an error naming the version, what was looked for and the table."""
        try:
            return mapping[key]
        except KeyError:
            raise UpstreamTableError(f"TensorRT-LLM {version}: no {kind} {key!r} in the {self.what} table") from None
