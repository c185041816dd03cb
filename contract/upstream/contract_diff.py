"""Where our Triton contract (contract/tensors.py, as rendered today) differs from NVIDIA's
(triton_models_<version>.json), and what each recorded NVIDIA client request would hit.

`python -m contract.upstream.contract_diff [version]` prints the report as Markdown; the
checked-in docs/upstream-contract-diff.md was produced from it plus prose.  This module only
reads both tables; it changes nothing in our contract.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from contract import names
from contract import tensors as ours
from contract.upstream import nvidia_clients as nc
from contract.upstream import triton_models as tm


@dataclass(frozen=True)
class OurModel:
    name: str
    inputs: tuple[ours.TensorSpec, ...]
    outputs: tuple[ours.TensorSpec, ...]
    decoupled: bool


# Our repository as build_engines renders it today (every engine-facing model decoupled).
OUR_MODELS = {
    names.ENSEMBLE: OurModel(names.ENSEMBLE, ours.ENSEMBLE_INPUTS, ours.ENSEMBLE_OUTPUTS, True),
    names.LLM_BLS: OurModel(names.LLM_BLS, ours.ENSEMBLE_INPUTS, ours.ENSEMBLE_OUTPUTS, True),
    names.TRTLLM_ENGINE: OurModel(names.TRTLLM_ENGINE, ours.TRTLLM_INPUTS, ours.TRTLLM_OUTPUTS, True),
    names.OPENVINO_ENGINE: OurModel(names.OPENVINO_ENGINE, ours.ENGINE_INPUTS, ours.ENGINE_OUTPUTS, True),
    names.PREPROCESSING: OurModel(names.PREPROCESSING, ours.PREPROCESSING_INPUTS, ours.PREPROCESSING_OUTPUTS, False),
    names.POSTPROCESSING: OurModel(
        names.POSTPROCESSING, ours.POSTPROCESSING_INPUTS, ours.POSTPROCESSING_OUTPUTS, False
    ),
}

# NVIDIA's model -> ours that plays its part (None: we have no model of that name).
COUNTERPART = {
    "ensemble": names.ENSEMBLE,
    "tensorrt_llm_bls": names.LLM_BLS,
    "tensorrt_llm": names.TRTLLM_ENGINE,
    "preprocessing": names.PREPROCESSING,
    "postprocessing": names.POSTPROCESSING,
}

UNARY = ("grpc_unary", "http_unary")


@dataclass
class TensorDiff:
    missing: list[tm.TensorDecl] = field(default_factory=list)  # NVIDIA declares, we do not
    extra: list[ours.TensorSpec] = field(default_factory=list)  # we declare, NVIDIA does not
    differ: list[tuple[str, str, str, str]] = field(default_factory=list)  # (name, what, nvidia, ours)


def _wire(spec: ours.TensorSpec) -> tuple[int, ...]:
    return (1, *spec.dims)


def diff_tensors(nvidia: tuple[tm.TensorDecl, ...], mine: tuple[ours.TensorSpec, ...], *, outputs: bool) -> TensorDiff:
    d = TensorDiff()
    mine_by = ours.by_name(mine)
    seen = set()
    for t in nvidia:
        if t.name in seen:
            continue
        seen.add(t.name)
        spec = mine_by.get(t.name)
        if spec is None:
            d.missing.append(t)
            continue
        if not t.templated and t.data_type != spec.dtype.config_name:
            d.differ.append((t.name, "data_type", t.data_type, spec.dtype.config_name))
        if t.dims != spec.dims:
            d.differ.append((t.name, "dims", str(list(t.dims)), str(list(spec.dims))))
        if t.wire_shape != _wire(spec) and not (t.dims != spec.dims and t.wire_shape == (1, *t.dims)):
            d.differ.append((t.name, "wire shape", str(list(t.wire_shape)), str(list(_wire(spec)))))
        if not outputs and t.optional and not spec.optional:
            d.differ.append((t.name, "optional", "optional", "required"))
    nvidia_names = {t.name for t in nvidia}
    d.extra = [s for s in mine if s.name not in nvidia_names]
    return d


def failures(request: nc.ClientRequest, *, bls_alias: bool = False) -> list[str]:
    """What our server (as rendered today) does wrong with this request, before any behaviour."""
    target = request.model
    if target == "tensorrt_llm_bls":
        if not bls_alias:
            return [f"model '{target}' does not exist (ours is '{names.LLM_BLS}')"]
        target = names.LLM_BLS
    model = OUR_MODELS.get(target)
    if model is None:
        return [f"model '{target}' does not exist"]
    out = []
    if request.transport in UNARY and model.decoupled:
        out.append(f"{request.transport} to a decoupled model: Triton refuses (gRPC UNIMPLEMENTED / HTTP 400)")
    declared = ours.by_name(model.inputs)
    for sent in request.inputs:
        spec = declared.get(sent.name)
        if spec is None and request.undeclared == "parameter":
            out.append(f"'{sent.name}' is no input of ours: it becomes a request parameter and is ignored")
        elif spec is None and request.undeclared == "dropped":
            out.append(f"'{sent.name}' is no input of ours: perf_analyzer leaves it out")
        elif spec is None:
            out.append(f"unexpected inference input '{sent.name}'")
        elif spec.dtype.wire_name != sent.datatype:
            out.append(f"'{sent.name}' datatype {sent.datatype}, ours {spec.dtype.wire_name}")
    sent_names = {t.name for t in request.inputs}
    if request.inputs:
        for spec in model.inputs:
            if not spec.optional and spec.name not in sent_names:
                out.append(f"required input '{spec.name}' not sent")
    for name in request.outputs or ():
        if name not in {s.name for s in model.outputs}:
            out.append(f"unexpected inference output '{name}'")
    if any("output[0].decode" in r for r in request.reads) and "text_output" in {s.name for s in model.outputs}:
        out.append("text_output arrives [1, 1]: output[0] is an ndarray, .decode() raises AttributeError")
    return out


def _fmt(t: tm.TensorDecl) -> str:
    return f"`{t.name}` {t.data_type} {list(t.dims)}{' opt' if t.optional else ''}"


def report(version: str) -> str:
    nvidia = tm.load_models(version)
    lines = [f"## Tensor declarations, TensorRT-LLM {version}", ""]
    for nv_name, our_name in COUNTERPART.items():
        mine = OUR_MODELS[our_name]
        for kind, nv_t, my_t in (
            ("inputs", nvidia[nv_name].inputs, mine.inputs),
            ("outputs", nvidia[nv_name].outputs, mine.outputs),
        ):
            d = diff_tensors(nv_t, my_t, outputs=kind == "outputs")
            lines.append(f"### {nv_name} {kind} vs our {our_name}")
            missing = ", ".join(_fmt(t) for t in d.missing) or "none"
            differ = "; ".join(f"`{n}` {w}: NVIDIA {a}, ours {b}" for n, w, a, b in d.differ) or "none"
            lines.append(f"- NVIDIA declares, we do not ({len(d.missing)}): {missing}")
            lines.append(f"- differences: {differ}")
            lines.append("- ours only: " + (", ".join(f"`{s.name}`" for s in d.extra) or "none"))
            lines.append("")
    lines += ["## NVIDIA's client requests against ours (as rendered today)", ""]
    for case in nc.load_client_cases():
        for i, request in enumerate(case.requests):
            now = failures(request)
            alias = failures(request, bls_alias=True) if request.model == "tensorrt_llm_bls" else None
            what = "; ".join(now) or "no declaration problem"
            if alias is not None:
                what += " | with the name fixed: " + ("; ".join(alias) or "no declaration problem")
            lines.append(f"- {case.script} `{case.case}` [{i}] -> {request.model} ({request.transport}): {what}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    for v in sys.argv[1:] or tm.VERSIONS:
        print(report(v))
