"""The one PASS/FAIL table of what the ecosystem points at the front: the client libraries
(test_client_compat.py: openai, langchain-openai, litellm, instructor) and the benchmark and
evaluation tools (guidellm, AIPerf, genai-perf; lm-evaluation-harness adds its row the same way),
each a row, each feature a column.  One session's rows, written at its end by the `compat_table`
fixture (tests/integration/conftest.py) to build/client-compat-report/: table.md (the table, a
cell per feature: pass / fail / not run / n/a) and results.json (every cell's full text, so a
failure says why).

A tool's test adds its row in one call per check, then fails on what failed:

    row = compat_table.row("guidellm 0.8.1", "chat, 2 streams", kind=TOOL)
    row.check(COMPLETES, totals["errored"] == 0, f"{totals}")
    row.check(ASKED_LENGTH, lengths == {32}, f"lengths {lengths}")
    row.assert_passed()

A check not reached (the tool failed first) shows as `not run`; a feature a row does not declare
as `n/a`.  Pure logic: tests/unit/test_compat_table.py."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from pathlib import Path

PASS = "pass"
NOT_RUN = "not run"
NOT_APPLICABLE = "n/a"

# The benchmark tools' features: what a team pointing one at the front needs to be true of its run.
COMPLETES = "completes every request"  # the tool's own count: every request answered, zero errors
ASKED_LENGTH = "asked output length"  # ignore_eos / min_tokens honoured: every answer exactly the asked length
LATENCIES = "TTFT and ITL"  # non-zero time to first token and inter-token latency
TOOL_FEATURES = (COMPLETES, ASKED_LENGTH, LATENCIES)
# lm-evaluation-harness's two models' features (its test adds the row: `row(..., features=EVAL_FEATURES)`).
LOGLIKELIHOOD = "loglikelihood (local-completions)"
GENERATION = "generation (local-chat-completions)"
EVAL_FEATURES = (LOGLIKELIHOOD, GENERATION)


class Kind(str, enum.Enum):
    CLIENT = "client library"
    TOOL = "tool"


CLIENT, TOOL = Kind.CLIENT, Kind.TOOL


def cell(result: str) -> str:
    """A result's table cell: `pass`, `fail`, `not run` or `n/a` (a failure's reason is in results.json)."""
    return result.split(":", 1)[0]


@dataclass
class Row:
    name: str  # the library or tool, with its pinned version: "guidellm 0.8.1"
    kind: Kind
    features: tuple[str, ...]
    target: str = ""  # what it ran against, where that varies: "chat, 2 streams", "ensemble gRPC"
    results: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.target})" if self.target else self.name

    def record(self, feature: str, result: str) -> None:
        if feature not in self.features:
            raise ValueError(f"{self.label}: {feature!r} is not one of its features {self.features}")
        self.results[feature] = result

    def check(self, feature: str, ok: bool, detail: str = "") -> bool:
        """One feature's outcome: `pass`, or `fail: <detail>`."""
        self.record(feature, PASS if ok else f"fail: {detail}" if detail else "fail")
        return ok

    def result(self, feature: str) -> str:
        return self.results.get(feature, NOT_RUN) if feature in self.features else NOT_APPLICABLE

    def failures(self) -> dict[str, str]:
        return {f: r for f, r in self.results.items() if cell(r) == "fail"}

    def assert_passed(self) -> None:
        """Fails the calling test with every failed feature of the row and why."""
        failed = self.failures()
        if failed:
            raise AssertionError(f"{self.label}: " + json.dumps(failed, indent=1))


@dataclass
class Table:
    """One table: its rows in the order they were added, its columns every row's features in
    the order they first appear (the client libraries' first when they ran)."""

    rows: dict[str, Row] = field(default_factory=dict)

    def row(self, name: str, target: str = "", kind: Kind = TOOL, features: tuple[str, ...] = TOOL_FEATURES) -> Row:
        """The row of `name` on `target`, made on first use."""
        key = f"{name}\0{target}"
        if key not in self.rows:
            self.rows[key] = Row(name, kind, tuple(features), target)
        return self.rows[key]

    def add(
        self, name: str, results: dict[str, str], kind: Kind = CLIENT, features: tuple[str, ...] = (), target: str = ""
    ) -> Row:
        """A whole row at once (a client library's checks report every feature in one JSON object)."""
        declared = tuple(features) + tuple(f for f in results if f not in features)
        row = self.row(name, target, kind, declared)
        for feature, result in results.items():
            row.record(feature, result)
        return row

    @property
    def columns(self) -> list[str]:
        seen: dict[str, None] = {}
        for row in sorted(self.rows.values(), key=lambda r: r.kind != CLIENT):
            seen.update(dict.fromkeys(row.features))
        return list(seen)

    def markdown(self) -> list[str]:
        columns = self.columns
        lines = ["| client or tool | kind | " + " | ".join(columns) + " |", "|---" * (len(columns) + 2) + "|"]
        for row in sorted(self.rows.values(), key=lambda r: r.kind != CLIENT):
            lines.append(
                f"| {row.label} | {row.kind.value} | " + " | ".join(cell(row.result(c)) for c in columns) + " |"
            )
        return lines

    def to_json(self) -> list[dict]:
        return [
            {"name": r.name, "target": r.target, "kind": r.kind.value, "results": {f: r.result(f) for f in r.features}}
            for r in self.rows.values()
        ]


@dataclass
class Report:
    """The session's tables: one per front the suites ran through (the CPU layout's, `server`,
    unless KIT_COMPAT_LAYOUTS names others)."""

    tables: dict[str, Table] = field(default_factory=dict)
    default: str = "server"

    def table(self, layout: str | None = None) -> Table:
        return self.tables.setdefault(layout or self.default, Table())

    def row(
        self,
        name: str,
        target: str = "",
        kind: Kind = TOOL,
        features: tuple[str, ...] = TOOL_FEATURES,
        layout: str | None = None,
    ) -> Row:
        return self.table(layout).row(name, target, kind, features)

    def paths(self, out: Path, layout: str) -> tuple[Path, Path]:
        suffix = "" if layout == self.default else f"-{layout}"
        return out / f"table{suffix}.md", out / f"results{suffix}.json"

    def write(self, out: Path) -> list[tuple[Path, list[str]]]:
        """Each table with rows as table[-<layout>].md and results[-<layout>].json under `out`;
        returns (path, lines) of each markdown table."""
        written = []
        for layout, table in self.tables.items():
            if not table.rows:
                continue
            out.mkdir(parents=True, exist_ok=True)
            markdown, results = self.paths(out, layout)
            lines = table.markdown()
            markdown.write_text("\n".join(lines) + "\n")
            results.write_text(json.dumps({"layout": layout, "rows": table.to_json()}, indent=1) + "\n")
            written.append((markdown, lines))
        return written
