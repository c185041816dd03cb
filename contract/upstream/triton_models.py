"""NVIDIA's Triton models of `all_models/inflight_batcher_llm` as typed data, per TensorRT-LLM version.

Loads `data/triton_models_<version>.json` (ensemble, tensorrt_llm_bls, tensorrt_llm,
preprocessing, postprocessing: every input and output, max_batch_size, decoupled, parameters,
the ensemble's step wiring) and `data/nvidia_behaviours_<version>.json` (what those models do
with the tensors, e.g. greedy decoding without top_k/top_p).  Every declaration keeps the
citation of the upstream lines it was read from.

Dims exclude the batch dimension, as in config.pbtxt.  `wire_shape` is the shape of the tensor
on the wire for a request of batch size 1 (what a client sends, or what it receives): usually
`[1, *dims]`, except where NVIDIA's model returns something else (text_output is 1-D).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contract.upstream.citation import Citation, Table, UpstreamTableError, load_table

VERSIONS: tuple[str, ...] = ("1.1.0", "1.2.1")
MODELS: tuple[str, ...] = ("ensemble", "tensorrt_llm_bls", "tensorrt_llm", "preprocessing", "postprocessing")

# config.pbtxt data_type -> the datatype string a tritonclient InferInput carries.
WIRE_DTYPES = {
    "TYPE_BOOL": "BOOL",
    "TYPE_UINT8": "UINT8",
    "TYPE_INT32": "INT32",
    "TYPE_INT64": "INT64",
    "TYPE_UINT64": "UINT64",
    "TYPE_FP16": "FP16",
    "TYPE_BF16": "BF16",
    "TYPE_FP32": "FP32",
    "TYPE_STRING": "BYTES",
}


@dataclass(frozen=True)
class TensorDecl:
    name: str
    data_type: str  # as in config.pbtxt: TYPE_INT32, or a template such as ${logits_datatype}
    dims: tuple[int, ...]
    optional: bool
    reshape: tuple[int, ...] | None  # reshape: { shape: [...] } (the model sees this, not the wire)
    allow_ragged_batch: bool
    wire_shape: tuple[int, ...]
    citation: Citation
    wire_note: str = ""

    @property
    def templated(self) -> bool:
        """The data type is a deployment choice (fill_template variable), not fixed."""
        return self.data_type.startswith("${")

    @property
    def wire_dtype(self) -> str | None:
        return WIRE_DTYPES.get(self.data_type)


@dataclass(frozen=True)
class ParameterDecl:
    key: str
    template: str | None  # the value in config.pbtxt, usually "${variable}"
    meaning: str
    commented_out: bool
    citation: Citation
    documented_at: Citation | None = None  # docs/model_config.md line, at the branch ref


@dataclass(frozen=True)
class StepMap:
    step: str  # the model the ensemble step runs
    direction: str  # "input_map" | "output_map"
    key: str  # the step model's tensor
    value: str  # the ensemble's tensor (or an internal _NAME)
    citation: Citation


@dataclass(frozen=True)
class ModelDecl:
    name: str
    platform: str | None
    backend: str | None
    max_batch_size: str  # a template in NVIDIA's repository: ${triton_max_batch_size}
    decoupled: bool | str  # False, or the template ${decoupled_mode}
    inputs: tuple[TensorDecl, ...]
    outputs: tuple[TensorDecl, ...]
    parameters: tuple[ParameterDecl, ...]
    citation: Citation

    def input(self, name: str) -> TensorDecl:
        return _one(self.inputs, name, self.name, "input")

    def output(self, name: str) -> TensorDecl:
        return _one(self.outputs, name, self.name, "output")

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.inputs)

    @property
    def output_names(self) -> tuple[str, ...]:
        """Unique names, in config order (NVIDIA's ensemble declares one output twice)."""
        return tuple(dict.fromkeys(t.name for t in self.outputs))

    @property
    def decoupled_by_deployment(self) -> bool:
        return isinstance(self.decoupled, str) and self.decoupled.startswith("${")


@dataclass(frozen=True)
class Behaviour:
    id: str
    fact: str
    citation: Citation
    also: tuple[Citation, ...] = ()
    consequence: str = ""


def _one(tensors: tuple[TensorDecl, ...], name: str, model: str, what: str) -> TensorDecl:
    for t in tensors:
        if t.name == name:
            return t
    raise KeyError(f"NVIDIA's {model} declares no {what} {name!r}")


def citations(table: Table, row: dict[str, Any]) -> tuple[Citation, ...]:
    """The row's own citation, then any further ones (`also`, `corroboration`), each checked
    against the table's sources."""
    found = [table.citation(row)]
    extra = row.get("also", [])
    more = ([extra] if isinstance(extra, dict) else list(extra)) + [row[k] for k in ("corroboration",) if k in row]
    for cite in more:
        found.append(table.citation({"cite": cite}))
    return tuple(found)


def _tensor(table: Table, row: dict[str, Any]) -> TensorDecl:
    return TensorDecl(
        row["name"],
        row["data_type"],
        tuple(row["dims"]),
        bool(row["optional"]),
        None if row["reshape"] is None else tuple(row["reshape"]),
        bool(row["allow_ragged_batch"]),
        tuple(row["wire_shape"]),
        table.citation(row),
        row.get("wire_note", ""),
    )


@lru_cache(maxsize=None)
def load_models(version: str) -> dict[str, ModelDecl]:
    """NVIDIA's five models at TensorRT-LLM `version`, keyed by model name."""
    if version not in VERSIONS:
        raise UpstreamTableError(f"no NVIDIA model table for TensorRT-LLM {version!r}; known: {', '.join(VERSIONS)}")
    table = load_table(f"triton_models_{version}")
    by_model: dict[str, dict[str, Any]] = {}
    for row in table.rows:
        citations(table, row)  # every citation must name a known source
        if row["kind"] == "model":
            by_model[row["model"]] = {"row": row, "input": [], "output": [], "parameter": []}
    for row in table.rows:
        kind = row["kind"]
        if kind in ("input", "output"):
            by_model[row["model"]][kind].append(_tensor(table, row))
        elif kind == "parameter":
            doc = row.get("corroboration")
            by_model[row["model"]]["parameter"].append(
                ParameterDecl(
                    row["key"],
                    row["template"],
                    row["meaning"],
                    bool(row["commented_out"]),
                    table.citation(row),
                    table.citation({"cite": doc}) if doc else None,
                )
            )
    models = {}
    for name, parts in by_model.items():
        row = parts["row"]
        models[name] = ModelDecl(
            name,
            row["platform"],
            row["backend"],
            row["max_batch_size"],
            row["decoupled"],
            tuple(parts["input"]),
            tuple(parts["output"]),
            tuple(parts["parameter"]),
            table.citation(row),
        )
    missing = set(MODELS) - set(models)
    if missing:
        raise UpstreamTableError(f"triton_models_{version}: no rows for {sorted(missing)}")
    return models


@lru_cache(maxsize=None)
def ensemble_steps(version: str) -> tuple[StepMap, ...]:
    """The ensemble's input_map/output_map entries, step by step."""
    table = load_table(f"triton_models_{version}")
    return tuple(
        StepMap(r["step"], r["map"], r["key"], r["value"], table.citation(r))
        for r in table.rows
        if r["kind"] == "step_map"
    )


def fed_by(version: str, ensemble_input: str) -> tuple[tuple[str, str], ...]:
    """(step model, step tensor) pairs an ensemble input feeds, e.g. top_k -> (tensorrt_llm, runtime_top_k)."""
    return tuple(
        (s.step, s.key) for s in ensemble_steps(version) if s.direction == "input_map" and s.value == ensemble_input
    )


@lru_cache(maxsize=None)
def load_behaviours(version: str) -> dict[str, Behaviour]:
    table = load_table(f"nvidia_behaviours_{version}")
    out = {}
    for row in table.rows:
        cites = citations(table, row)
        out[row["id"]] = Behaviour(row["id"], row["fact"], cites[0], cites[1:], row.get("consequence", ""))
    return out
