"""What each TensorRT-LLM engine path does with each sampling field we send, per version.

Data: `data/sampling_support_<version>.json` (every row cites upstream; see citation.py).  One row
per (path, field): the C++ `tensorrt_llm` backend over the executor (`engine`), and the PyTorch
backend through the LLM API with its default sampler (`pytorch`).  A field is `honoured`, or
`ignored`: accepted (SamplingParams / the request tensor takes it) and then not applied.  An
ignored row names the other sampler of that version that honours it, if upstream has one, and
how a deployment selects it (`alternative`).

contract/features.py derives what each deployment honours from these rows, so preprocessing
refuses an ignored field by name and version instead of passing it on:

    table = sampling_support("1.2.1")
    table.row(EnginePath.PYTORCH, "seed").support        # Support.IGNORED
    [r.field for r in table.ignored(EnginePath.PYTORCH)]  # the fields to refuse there
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from functools import lru_cache

from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table, table_names

TABLE_PREFIX = "sampling_support_"

# The sampling fields we send to an engine, by their ensemble input names (contract/tensors.py).
SAMPLING_FIELDS = (
    "temperature",
    "top_k",
    "top_p",
    "min_tokens",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "bad_words",
    "stop_words",
    "embedding_bias",
)


class EnginePath(str, enum.Enum):
    ENGINE = "engine"  # trtllm-build engine + the C++ tensorrt_llm Triton backend + the executor's decoder
    PYTORCH = "pytorch"  # the PyTorch backend through the LLM API (tensorrt_llm_pytorch), default sampler


class Support(str, enum.Enum):
    HONOURED = "honoured"
    IGNORED = "ignored"  # accepted and not applied


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
    rows: dict[tuple[EnginePath, str], SamplingRow]

    def row(self, path: EnginePath, field: str) -> SamplingRow:
        try:
            return self.rows[(EnginePath(path), field)]
        except KeyError:
            raise UpstreamTableError(
                f"TensorRT-LLM {self.version}: no sampling row for {field!r} on the {EnginePath(path).value} path"
            ) from None

    def ignored(self, path: EnginePath) -> tuple[SamplingRow, ...]:
        return tuple(r for (p, _), r in self.rows.items() if p == EnginePath(path) and r.support == Support.IGNORED)

    def honoured(self, path: EnginePath, field: str) -> bool:
        return self.row(path, field).support == Support.HONOURED


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


@lru_cache(maxsize=None)
def sampling_support(version: str) -> SamplingSupport:
    if version not in supported_versions():
        raise UpstreamTableError(
            f"no sampling-support table for TensorRT-LLM {version} (have {', '.join(supported_versions())})"
        )
    table = load_table(TABLE_PREFIX + version)
    if table.upstream_version != version:
        raise UpstreamTableError(f"{table.name}: upstream_version {table.upstream_version!r} is not {version!r}")
    rows: dict[tuple[EnginePath, str], SamplingRow] = {}
    for raw in table.rows:
        row = _row(table, raw)
        if row.field not in SAMPLING_FIELDS:
            raise UpstreamTableError(f"{table.name}: {row.id}: {row.field!r} is not a sampling field {SAMPLING_FIELDS}")
        if (row.path, row.field) in rows:
            raise UpstreamTableError(f"{table.name}: two rows for {row.field!r} on the {row.path.value} path")
        rows[(row.path, row.field)] = row
    missing = [(p.value, f) for p in EnginePath for f in SAMPLING_FIELDS if (p, f) not in rows]
    if missing:
        raise UpstreamTableError(f"{table.name}: no row for {missing}")
    return SamplingSupport(version, table, rows)
