"""What each TensorRT-LLM engine path does with each sampling field we send, per version.

Data: `data/sampling_support_<version>.json` (every row cites upstream; see citation.py).  One row
per (path, sampler, field): the C++ `tensorrt_llm` backend over the executor (`engine`), and the
PyTorch backend through the LLM API (`pytorch`) with each sampler of that version read
(TorchSampler, the default; TRTLLMSampler at 1.2.1, chosen per LLM with sampler_type).  A field
is `honoured`, `ignored` (accepted - SamplingParams / the request tensor takes it - and then not
applied), or `not_read` (taken as not applied).  An ignored row names the other sampler of that
version that honours it, if upstream has one (`alternative`).  Rows of kind `sampler` describe a
path's samplers: which is the default, how one is selected, and its limits (`SamplerInfo`).

contract/features.py derives what each deployment honours from these rows, so preprocessing
refuses an ignored field by name and version instead of passing it on:

    table = sampling_support("1.2.1")
    table.row(EnginePath.PYTORCH, "seed").support                    # Support.IGNORED (TorchSampler)
    table.row(EnginePath.PYTORCH, "seed", "TRTLLMSampler").support   # Support.HONOURED
    [r.field for r in table.ignored(EnginePath.PYTORCH)]              # the fields to refuse there
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache

from contract import sampling_fields
from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table, table_names

TABLE_PREFIX = "sampling_support_"

# The sampling fields we send to an engine, by their ensemble input names: the table's
# (contract/sampling_fields.py) and the word lists and bias (every version has a row for each).
SAMPLING_FIELDS = (*sampling_fields.NAMES, "bad_words", "stop_words", "embedding_bias")


class EnginePath(str, enum.Enum):
    ENGINE = "engine"  # trtllm-build engine + the C++ tensorrt_llm Triton backend + the executor's decoder
    PYTORCH = "pytorch"  # the PyTorch backend through the LLM API (tensorrt_llm_pytorch), default sampler


class Support(str, enum.Enum):
    HONOURED = "honoured"
    IGNORED = "ignored"  # accepted and not applied
    NOT_READ = "not_read"  # what the sampler does with it was not read: taken as not applied


@dataclass(frozen=True)
class SamplerLimit:
    id: str
    limit: str
    citation: Citation


@dataclass(frozen=True)
class SamplerInfo:
    """One sampler of an engine path at one version (rows of kind `sampler`)."""

    id: str
    path: EnginePath
    sampler: str
    default: bool
    selected_by: str
    rule: str
    citation: Citation
    limits: tuple[SamplerLimit, ...]

    def limit(self, limit_id: str) -> SamplerLimit | None:
        return next((x for x in self.limits if x.id == limit_id), None)


@dataclass(frozen=True)
class Alternative:
    """Another sampler of the same version that honours an ignored field."""

    sampler: str
    selected_by: str  # how a deployment selects it (an LLM argument, ...), and its limits
    citation: Citation


@dataclass(frozen=True)
class SamplingRow:
    id: str
    path: EnginePath
    field: str
    sampler: str  # the sampler this row describes (TorchSampler, the executor's decoding layers)
    support: Support
    rule: str
    citation: Citation
    alternative: Alternative | None
    evidence: tuple[str, ...]  # upstream pull requests / issues that state the same, by number


@dataclass(frozen=True)
class SamplingSupport:
    version: str
    table: Table
    rows: dict[tuple[EnginePath, str, str], SamplingRow]  # (path, sampler, field)
    samplers: dict[tuple[EnginePath, str], SamplerInfo]

    def default_sampler(self, path: EnginePath) -> str:
        """The sampler a path runs unless told otherwise (the engine flow: its only one)."""
        names = self.sampler_names(path)
        defaults = [s.sampler for (p, _), s in self.samplers.items() if p == EnginePath(path) and s.default]
        return defaults[0] if defaults else names[0]

    def sampler_names(self, path: EnginePath) -> list[str]:
        seen: dict[str, None] = {}
        for p, sampler, _ in self.rows:
            if p == EnginePath(path):
                seen.setdefault(sampler, None)
        return list(seen)

    def sampler(self, path: EnginePath, sampler: str) -> SamplerInfo:
        try:
            return self.samplers[(EnginePath(path), sampler)]
        except KeyError:
            raise UpstreamTableError(
                f"TensorRT-LLM {self.version}: no sampler {sampler!r} on the {EnginePath(path).value} path "
                f"(have {self.sampler_names(path)})"
            ) from None

    def row(self, path: EnginePath, field: str, sampler: str | None = None) -> SamplingRow:
        sampler = sampler or self.default_sampler(path)
        try:
            return self.rows[(EnginePath(path), sampler, field)]
        except KeyError:
            raise UpstreamTableError(
                f"TensorRT-LLM {self.version}: no sampling row for {field!r} on the {EnginePath(path).value} path "
                f"with {sampler}"
            ) from None

    def ignored(self, path: EnginePath, sampler: str | None = None) -> tuple[SamplingRow, ...]:
        """Rows of fields the sampler does not apply (ignored, or not read)."""
        sampler = sampler or self.default_sampler(path)
        return tuple(
            r
            for (p, s, _), r in self.rows.items()
            if p == EnginePath(path) and s == sampler and r.support != Support.HONOURED
        )

    def honoured(self, path: EnginePath, field: str, sampler: str | None = None) -> bool:
        return self.row(path, field, sampler).support == Support.HONOURED

    def samplers_honouring(self, path: EnginePath, fields: tuple[str, ...]) -> list[str]:
        """The samplers of `path` that apply every one of `fields`, the default first."""
        names = sorted(self.sampler_names(path), key=lambda n: n != self.default_sampler(path))
        return [n for n in names if all(self.honoured(path, f, n) for f in fields)]


def supported_versions() -> list[str]:
    return sorted(name[len(TABLE_PREFIX) :] for name in table_names() if name.startswith(TABLE_PREFIX))


def _row(table: Table, raw: dict) -> SamplingRow:
    alt = raw.get("alternative")
    alternative = None
    if alt is not None:
        alternative = Alternative(alt["sampler"], alt["selected_by"], table.citation(alt))
    return SamplingRow(
        raw["id"],
        EnginePath(raw["path"]),
        raw["field"],
        raw["sampler"],
        Support(raw["support"]),
        raw["rule"],
        table.citation(raw),
        alternative,
        tuple(raw.get("evidence", ())),
    )


def _sampler(table: Table, raw: dict) -> SamplerInfo:
    limits = tuple(SamplerLimit(x["id"], x["limit"], table.citation(x)) for x in raw.get("limits", ()))
    return SamplerInfo(
        raw["id"],
        EnginePath(raw["path"]),
        raw["sampler"],
        bool(raw["default"]),
        raw["selected_by"],
        raw["rule"],
        table.citation(raw),
        limits,
    )


@lru_cache(maxsize=None)
def sampling_support(version: str) -> SamplingSupport:
    if version not in supported_versions():
        raise UpstreamTableError(
            f"no sampling-support table for TensorRT-LLM {version} (have {', '.join(supported_versions())})"
        )
    table = load_table(TABLE_PREFIX + version)
    if table.upstream_version != version:
        raise UpstreamTableError(f"{table.name}: upstream_version {table.upstream_version!r} is not {version!r}")
    rows: dict[tuple[EnginePath, str, str], SamplingRow] = {}
    samplers: dict[tuple[EnginePath, str], SamplerInfo] = {}
    for raw in table.rows:
        if raw.get("kind") == "sampler":
            info = _sampler(table, raw)
            samplers[(info.path, info.sampler)] = info
            continue
        row = _row(table, raw)
        if row.field not in SAMPLING_FIELDS:
            raise UpstreamTableError(f"{table.name}: {row.id}: {row.field!r} is not a sampling field {SAMPLING_FIELDS}")
        key = (row.path, row.sampler, row.field)
        if key in rows:
            raise UpstreamTableError(
                f"{table.name}: two rows for {row.field!r} on the {row.path.value} path ({row.sampler})"
            )
        rows[key] = row
    pairs = {(p, s) for p, s, _ in rows} | {(p, "") for p in EnginePath if not any(k[0] == p for k in rows)}
    missing = [(p.value, s, f) for p, s in sorted(pairs) for f in SAMPLING_FIELDS if (p, s, f) not in rows]
    if missing:
        raise UpstreamTableError(f"{table.name}: no row for {missing}")
    for (p, s), info in samplers.items():
        if (p, s) not in pairs:
            raise UpstreamTableError(f"{table.name}: {info.id} describes a sampler without field rows")
    return SamplingSupport(version, table, rows, samplers)
