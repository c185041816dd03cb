"""Render the Triton model repository from the tensor tables and a build record.

Every config.pbtxt is built as a `ModelConfig` protobuf message and printed with
`text_format`, so a misspelt field is an error here, not a silent default in Triton.
There is no templating and no placeholder that could stay unfilled.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from contract import names
from contract.tensors import (
    ENGINE_INPUTS,
    ENGINE_OUTPUTS,
    ENGINE_TO_CLIENT,
    ENSEMBLE_INPUTS,
    ENSEMBLE_OUTPUTS,
    POSTPROCESSING_INPUTS,
    POSTPROCESSING_OUTPUTS,
    PREPROCESSING_INPUTS,
    PREPROCESSING_OUTPUTS,
    TensorSpec,
)

MODEL_SOURCES = Path(__file__).resolve().parent.parent / "model_repository"


class RenderError(ValueError):
    pass


def io_message(spec: TensorSpec, cls: type):
    msg = cls(name=spec.name, data_type=mc.DataType.Value(spec.dtype.config_name), dims=list(spec.dims))
    if cls is mc.ModelInput:
        msg.optional = spec.optional
    return msg


def python_model_config(name: str, inputs: Iterable[TensorSpec], outputs: Iterable[TensorSpec], *,
                        max_batch_size: int, parameters: dict[str, str], decoupled: bool = False,
                        instance_count: int = 1, dynamic_batching: bool = True) -> mc.ModelConfig:
    config = mc.ModelConfig(name=name, backend="python", max_batch_size=max_batch_size)
    config.input.extend(io_message(t, mc.ModelInput) for t in inputs)
    config.output.extend(io_message(t, mc.ModelOutput) for t in outputs)
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=instance_count)
    if decoupled:
        config.model_transaction_policy.decoupled = True
    if dynamic_batching:
        config.dynamic_batching.SetInParent()
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config


def internal(producer: str, name: str) -> str:
    """Ensemble-internal name of a step's output tensor."""
    return f"_{producer}_{name}"




def ensemble_config(engine_model: str, max_batch_size: int) -> mc.ModelConfig:
    config = mc.ModelConfig(name=names.ENSEMBLE, platform="ensemble", max_batch_size=max_batch_size)
    config.input.extend(io_message(t, mc.ModelInput) for t in ENSEMBLE_INPUTS)
    config.output.extend(io_message(t, mc.ModelOutput) for t in ENSEMBLE_OUTPUTS)
    steps = config.ensemble_scheduling.step

    pre = steps.add(model_name=names.PREPROCESSING, model_version=-1)
    for t in PREPROCESSING_INPUTS:
        pre.input_map[t.name] = t.name
    for t in PREPROCESSING_OUTPUTS:
        pre.output_map[t.name] = internal(names.PREPROCESSING, t.name)

    engine = steps.add(model_name=engine_model, model_version=-1)
    for t in ENGINE_INPUTS:
        engine.input_map[t.name] = internal(names.PREPROCESSING, t.name)
    for t in ENGINE_OUTPUTS:
        engine.output_map[t.name] = t.name if t.name in ENGINE_TO_CLIENT else internal("engine", t.name)

    post = steps.add(model_name=names.POSTPROCESSING, model_version=-1)
    for t in POSTPROCESSING_INPUTS:
        post.input_map[t.name] = engine.output_map[t.name]
    for t in POSTPROCESSING_OUTPUTS:
        post.output_map[t.name] = t.name
    return config


@dataclass(frozen=True)
class RenderedModel:
    config: mc.ModelConfig
    source: Path | None  # model.py to copy into version 1, None for the ensemble


def write_repository(models: list[RenderedModel], out_dir: Path) -> None:
    """Write the repository atomically: into a sibling directory, then swap it in."""
    check_ensemble_wiring([m.config for m in models])
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for model in models:
        model_dir = staging / model.config.name
        (model_dir / "1").mkdir(parents=True)
        (model_dir / "config.pbtxt").write_text(text_format.MessageToString(model.config))
        if model.source is not None:
            shutil.copyfile(model.source, model_dir / "1" / "model.py")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    staging.rename(out_dir)


def read_config(path: Path) -> mc.ModelConfig:
    return text_format.Parse(path.read_text(), mc.ModelConfig())


def check_ensemble_wiring(configs: list[mc.ModelConfig]) -> None:
    """What Triton checks when it loads an ensemble, checked before anything is written:
    every step input is an ensemble input or an earlier step's output, with the same dtype;
    every required model input is fed; every ensemble output is produced once; and no step
    mixes tensors that originate from different decoupled models (Triton's rule: a step
    downstream of a decoupled model may only read that model's outputs)."""
    by_name = {c.name: c for c in configs}
    for ens in (c for c in configs if c.platform == "ensemble"):
        dtype = {i.name: i.data_type for i in ens.input}
        origin = {i.name: ens.name for i in ens.input}  # decoupled origin of each tensor
        for step in ens.ensemble_scheduling.step:
            model = by_name.get(step.model_name)
            if model is None:
                raise RenderError(f"ensemble step uses model {step.model_name!r}, which is not in the repository")
            _check_step_inputs(step, model, dtype)
            origins = {origin[source] for source in step.input_map.values()}
            if len(origins) > 1:
                raise RenderError(f"{step.model_name}: inputs originate from different decoupled models {sorted(origins)}")
            produced_by = model.name if model.model_transaction_policy.decoupled else origins.pop()
            model_outputs = {o.name: o.data_type for o in model.output}
            for key, target in step.output_map.items():
                if key not in model_outputs:
                    raise RenderError(f"{step.model_name}: output_map key {key!r} is not an output of the model")
                if target in dtype:
                    raise RenderError(f"{step.model_name}: tensor {target!r} is produced twice")
                dtype[target], origin[target] = model_outputs[key], produced_by
        for out in ens.output:
            if out.name not in dtype:
                raise RenderError(f"ensemble output {out.name!r} is produced by no step")
            if dtype[out.name] != out.data_type:
                raise RenderError(f"ensemble output {out.name!r}: dtype differs from the step that produces it")
        if len({origin[o.name] for o in ens.output}) > 1:
            raise RenderError("ensemble outputs originate from different decoupled models")


def _check_step_inputs(step, model: mc.ModelConfig, dtype: dict[str, int]) -> None:
    model_inputs = {i.name: i for i in model.input}
    for key, source in step.input_map.items():
        if key not in model_inputs:
            raise RenderError(f"{step.model_name}: input_map key {key!r} is not an input of the model")
        if source not in dtype:
            raise RenderError(f"{step.model_name}: input {key!r} reads {source!r}, which no earlier step produces")
        if dtype[source] != model_inputs[key].data_type:
            raise RenderError(
                f"{step.model_name}: input {key!r} is {mc.DataType.Name(model_inputs[key].data_type)} but "
                f"{source!r} is {mc.DataType.Name(dtype[source])}"
            )
    missing = [i.name for i in model.input if not i.optional and i.name not in step.input_map]
    if missing:
        raise RenderError(f"{step.model_name}: required inputs {missing} are not fed by the ensemble")
