"""The ModelOpt table (`data/modelopt_hf_ptq_<version>.json`) as typed objects: which ModelOpt a
TensorRT-LLM version pins, hf_ptq.py's flags (checked like the engine-build tools' flags), the
formats it exports as Hugging Face checkpoints for the LLM API, and its rules.

    table = modelopt_for_trtllm("1.2.1")
    table.format("fp8").quant_algo            # 'FP8'
    table.check_argv(["--qformat", "fp8"])    # [] (or the problems)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table, table_names
from contract.upstream.trtllm_build import FlagType, ToolFlag, check_flags

TABLE_PREFIX = "modelopt_hf_ptq_"
TOOL = "hf_ptq"


@dataclass(frozen=True)
class ExportFormat:
    precision: str  # ours (--precision)
    qformat: str  # hf_ptq.py --qformat
    quant_algo: str  # what hf_quant_config.json says afterwards
    min_sm: int | None
    citation: Citation


@dataclass(frozen=True)
class ModelOptTable:
    version: str
    trtllm_versions: tuple[str, ...]  # the TensorRT-LLM releases that pin this ModelOpt
    requirement: str
    tool_path: str  # hf_ptq.py inside ModelOpt's source at the tag
    flags: dict[str, ToolFlag]
    formats: dict[str, ExportFormat]  # by our precision
    kv_formats: dict[str, dict[str, Any]]  # by our kv_cache_dtype
    rules: dict[str, dict[str, Any]]
    table: Table

    def format(self, precision: str) -> ExportFormat:
        try:
            return self.formats[precision]
        except KeyError:
            raise UpstreamTableError(
                f"ModelOpt {self.version} exports no Hugging Face checkpoint for precision "
                f"{precision!r}; it does for {sorted(self.formats)}"
            ) from None

    def rule(self, rule_id: str) -> dict[str, Any]:
        return self.rules[rule_id]

    def citation(self, row: dict[str, Any]) -> Citation:
        return self.table.citation(row)

    def check_argv(self, argv: Sequence[str]) -> list[str]:
        """Every flag of argv (after the script) that hf_ptq.py at this version does not define or accept."""
        return check_flags(
            argv, self.flags.get, lambda token: f"hf_ptq.py {token} is not a flag of ModelOpt {self.version}"
        )


def supported_versions() -> list[str]:
    return sorted(name[len(TABLE_PREFIX) :] for name in table_names() if name.startswith(TABLE_PREFIX))


@lru_cache(maxsize=None)
def load_modelopt_table(version: str) -> ModelOptTable:
    if version not in supported_versions():
        raise UpstreamTableError(f"ModelOpt {version!r} has no table; have {supported_versions()}")
    table = load_table(TABLE_PREFIX + version)
    kinds: dict[str, list[dict[str, Any]]] = {}
    for row in table.rows:
        kinds.setdefault(row["kind"], []).append(row)
    unknown = set(kinds) - {"pin", "tool", "flag", "format", "kv_format", "rule"}
    if unknown:
        raise UpstreamTableError(f"{table.name}: unknown row kinds {sorted(unknown)}")
    (tool,) = kinds["tool"]
    return ModelOptTable(
        version=version,
        trtllm_versions=tuple(r["trtllm_version"] for r in kinds["pin"]),
        requirement=kinds["pin"][0]["requirement"],
        tool_path=tool["command"],
        flags={
            r["flag"]: ToolFlag(
                TOOL,
                r["flag"],
                FlagType(r["type"]),
                tuple(r.get("values", ())),
                r.get("default"),
                table.citation(r),
                None,
            )
            for r in kinds["flag"]
        },
        formats={
            r["precision"]: ExportFormat(
                r["precision"], r["qformat"], r["quant_algo"], r.get("min_sm"), table.citation(r)
            )
            for r in kinds["format"]
        },
        kv_formats={r["kv_cache_dtype"]: r for r in kinds.get("kv_format", [])},
        rules={r["id"]: r for r in kinds.get("rule", [])},
        table=table,
    )


def modelopt_for_trtllm(trtllm_version: str) -> ModelOptTable:
    """The ModelOpt table of the release this TensorRT-LLM version pins."""
    for version in supported_versions():
        table = load_modelopt_table(version)
        if trtllm_version in table.trtllm_versions:
            return table
    raise UpstreamTableError(
        f"no ModelOpt table for TensorRT-LLM {trtllm_version}; tables: "
        + ", ".join(f"{v} ({load_modelopt_table(v).trtllm_versions})" for v in supported_versions())
    )
