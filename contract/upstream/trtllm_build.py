"""The engine-build conformance tables (`data/trtllm_build_<version>.json`) as typed objects.

One table per supported TensorRT-LLM version holds four kinds of rows, each citing upstream:
- `image`: a Triton release whose TensorRT-LLM image ships this version (and its TensorRT);
- `tool`: one of the three build tools (trtllm-build, quantize.py, the Llama convert_checkpoint.py);
- `flag`: a flag of a tool with its type and accepted values;
- `rule`: an implicit rule of the builder or executor (parameters as data, logic in
  build_engines/trtllm/rules.py, which implements every rule id and nothing else).

The planner checks every argv it emits against the table (`check_argv`), so a flag or value the
pinned tools do not accept fails at plan time, not inside the image.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from contract.upstream.citation import DATA_DIR, Citation, Table, UpstreamTableError, load_table, table_names

TABLE_PREFIX = "trtllm_build_"


class FlagType(str, enum.Enum):
    INT = "int"
    STR = "str"
    CHOICE = "choice"
    FLAG = "flag"  # store_true: no value follows


@dataclass(frozen=True)
class ImagePin:
    release: str  # "25.12"
    image: str  # the NGC image reference
    trtllm_version: str
    tensorrt_version: str
    trtllm_ref: str  # the TensorRT-LLM branch the tensorrtllm_backend branch builds
    trtllm_commit: str  # the tensorrt_llm submodule commit of that branch
    citation: Citation
    # Where the image's C++ Triton backend is built from, when read (server build.py of the release):
    backend_repo: str = ""  # e.g. triton-inference-server/TensorRT-LLM (the fork)
    backend_ref: str = ""  # the branch build.py clones
    backend_citation: Citation | None = None


@dataclass(frozen=True)
class ToolFlag:
    tool: str
    flag: str
    type: FlagType
    values: tuple[str, ...]
    default: str | None
    citation: Citation
    used_at_tag: Citation | None  # a tensorrtllm_backend doc of the image's branch that runs the tool with it

    def problem(self, value: str | None) -> str | None:
        """Why `value` is not accepted by this flag, or None."""
        if self.type == FlagType.FLAG:
            return None if value is None else f"{self.tool} {self.flag} takes no value, got {value!r}"
        if value is None:
            return f"{self.tool} {self.flag} needs a value"
        if self.type == FlagType.INT and not value.lstrip("-").isdigit():
            return f"{self.tool} {self.flag} takes an integer, got {value!r}"
        if self.type == FlagType.CHOICE and value not in self.values:
            return f"{self.tool} {self.flag} accepts {list(self.values)}, got {value!r}"
        return None


@dataclass(frozen=True)
class BuildRule:
    id: str
    summary: str
    params: dict[str, Any]
    citation: Citation

    def describe(self) -> str:
        """The rule and where it was read, in one line (the citation's note stays in the table)."""
        source, cite = self.citation.source, self.citation
        where = f"{source.repo}@{source.ref}:{source.path} L{cite.lines}"
        if not cite.confirmed:
            where += f", read at {source.commit[:12]}, not at the tag"
        return f"{self.summary} [{where}]"


@dataclass(frozen=True)
class TrtllmBuildTable:
    version: str
    images: tuple[ImagePin, ...]
    tools: dict[str, Citation]  # tool name -> where its arguments are declared
    flags: dict[tuple[str, str], ToolFlag]  # (tool, flag) -> flag
    rules: dict[str, BuildRule]
    table: Table

    @property
    def file(self) -> Path:
        """The table's file, relative to the repository root."""
        return (DATA_DIR / f"{self.table.name}.json").relative_to(DATA_DIR.parents[2])

    @property
    def newest_image(self) -> ImagePin:
        return max(self.images, key=lambda pin: tuple(int(p) for p in pin.release.split(".")))

    def image(self, release: str) -> ImagePin:
        for pin in self.images:
            if pin.release == release:
                return pin
        raise UpstreamTableError(
            f"Triton release {release!r} does not ship TensorRT-LLM {self.version}; "
            f"its releases: {[p.release for p in self.images]}"
        )

    def rule(self, rule_id: str) -> BuildRule | None:
        return self.rules.get(rule_id)

    def required_rule(self, rule_id: str) -> BuildRule:
        """A rule the kit relies on: every supported version's table has it."""
        rule = self.rules.get(rule_id)
        if rule is None:
            raise UpstreamTableError(f"TensorRT-LLM {self.version}: no rule {rule_id!r} in the build table")
        return rule

    def check_argv(self, tool: str, argv: Sequence[str]) -> list[str]:
        """Every flag of `argv` (after the program) that the pinned `tool` does not define or accept."""
        if tool not in self.tools:
            return [f"{tool!r} is not a tool of TensorRT-LLM {self.version}; tools: {sorted(self.tools)}"]
        return check_flags(
            argv,
            lambda token: self.flags.get((tool, token)),
            lambda token: f"{tool} {token} is not a flag of TensorRT-LLM {self.version}",
        )


def check_flags(
    argv: Sequence[str], flag_of: Callable[[str], "ToolFlag | None"], unknown: Callable[[str], str]
) -> list[str]:
    """Walk a command line (after the program): every `--flag` the table does not define
    (`unknown(token)`), and every value a defined flag does not accept (its `problem`)."""
    problems, i = [], 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("--"):
            continue
        flag = flag_of(token)
        if flag is None:
            problems.append(unknown(token))
            continue
        value = None
        if flag.type != FlagType.FLAG and i < len(argv) and not argv[i].startswith("--"):
            value, i = argv[i], i + 1
        if problem := flag.problem(value):
            problems.append(problem)
    return problems


def _flag(table: Table, row: dict[str, Any]) -> ToolFlag:
    used = row.get("used_at_tag")
    return ToolFlag(
        tool=row["tool"],
        flag=row["flag"],
        type=FlagType(row["type"]),
        values=tuple(row.get("values", ())),
        default=row.get("default"),
        citation=table.citation(row),
        used_at_tag=table.citation({"cite": used}) if used else None,
    )


def _image(table: Table, row: dict[str, Any]) -> ImagePin:
    backend = row.get("backend") or {}
    return ImagePin(
        release=row["release"],
        image=row["image"],
        trtllm_version=row["trtllm_version"],
        tensorrt_version=row["tensorrt_version"],
        trtllm_ref=row["trtllm_ref"],
        trtllm_commit=row["trtllm_commit"],
        citation=table.citation(row),
        backend_repo=backend.get("repo", ""),
        backend_ref=backend.get("ref", ""),
        backend_citation=table.citation(backend) if backend else None,
    )


def supported_versions() -> list[str]:
    return sorted(name[len(TABLE_PREFIX) :] for name in table_names() if name.startswith(TABLE_PREFIX))


@lru_cache(maxsize=None)
def load_build_table(version: str) -> TrtllmBuildTable:
    if version not in supported_versions():
        raise UpstreamTableError(
            f"TensorRT-LLM {version!r} has no conformance table; supported: {supported_versions()}"
        )
    table = load_table(TABLE_PREFIX + version)
    if table.upstream_version != version:
        raise UpstreamTableError(f"{table.name}: upstream_version {table.upstream_version!r} is not {version!r}")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row in table.rows:
        by_kind.setdefault(row.get("kind", ""), []).append(row)
    unknown = set(by_kind) - {"image", "tool", "flag", "rule"}
    if unknown:
        raise UpstreamTableError(f"{table.name}: unknown row kinds {sorted(unknown)}")
    return TrtllmBuildTable(
        version=version,
        images=tuple(_image(table, r) for r in by_kind.get("image", [])),
        tools={r["tool"]: table.citation(r) for r in by_kind.get("tool", [])},
        flags={(r["tool"], r["flag"]): _flag(table, r) for r in by_kind.get("flag", [])},
        rules={
            r["id"]: BuildRule(r["id"], r["summary"], dict(r.get("params", {})), table.citation(r))
            for r in by_kind.get("rule", [])
        },
        table=table,
    )


def version_of_release(release: str) -> str:
    """The TensorRT-LLM version a Triton release ships (e.g. '26.07' -> '1.2.1')."""
    for version in supported_versions():
        if any(pin.release == release for pin in load_build_table(version).images):
            return version
    known = [pin.release for v in supported_versions() for pin in load_build_table(v).images]
    raise UpstreamTableError(f"Triton release {release!r} is not supported; supported releases: {known}")
