"""`inspect ENGINE_DIR` and `eval-quality`: a built engine's fidelity, shown or measured again."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from build_engines.fidelity.evaluate import cpu_flags
from build_engines.fidelity.gate import gate_problems
from build_engines.fidelity.show import report_lines
from build_engines.openvino.numerics import numerics_lines, served_numerics
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend
from contract.build_record import BuildRecord


def engine_summary(engine_dir: Path, as_json: bool = False) -> str:
    record = BuildRecord.read(engine_dir)
    if as_json:
        return json.dumps(dataclasses.asdict(record), indent=2, sort_keys=True)
    spec = record.spec
    lines = [
        f"engine: {engine_dir} ({record.backend}, {spec['precision']} weights), built {record.built_at} "
        f"in {record.build_seconds:.0f} s from {spec['checkpoint']}",
        f"size on disk: {sum(record.artifacts.values()) / 1e6:.1f} MB",
    ]
    if record.compression:
        lines.append(f"int4 compression: {json.dumps(record.compression.get('recipe', {}))}")
    if record.backend == EngineBackend.OPENVINO.value:
        built = BuildSpec.from_dict(spec)
        lines += numerics_lines(built.openvino, built.fidelity.evaluation != "off", record.numerics, cpu_flags())
    return "\n".join(lines + report_lines(record.fidelity))


def evaluate_built_engine(engine_dir: Path, evaluation: str, store: bool) -> str:
    """Run the report on a built CPU engine with the numerics it is served with."""
    from build_engines.fidelity.__main__ import evaluate_openvino_engine

    record = BuildRecord.read(engine_dir)
    spec = BuildSpec.from_dict(record.spec)
    if spec.backend != EngineBackend.OPENVINO:
        raise ValueError(
            "eval-quality runs CPU engines here; TensorRT-LLM engines are measured by the GPU tests "
            "(tests/integration/test_gpu_fidelity.py) on a GPU host"
        )
    ov = spec.openvino
    served = served_numerics(ov.numerics, ov.pinned_numerics(), record.numerics)
    report = evaluate_openvino_engine(
        engine_dir,
        spec.checkpoint,
        served.activation_precision,
        served.kv_cache_precision,
        evaluation,
        ov.inference_threads,
        log=lambda msg: None,
        dynamic_quantization_group_size=served.dynamic_quantization_group_size,
    )
    limits = spec.fidelity.limits(spec.precision.value)
    lines = report_lines(report)
    if limits is not None:
        report["gate"] = limits.to_dict()
        problems = gate_problems(report["logits"], limits)
        lines = report_lines(report)
        if problems:
            lines[-1] = f"  gate FAILED: {'; '.join(problems)}"
    if store:
        dataclasses.replace(record, fidelity=report).write(engine_dir)
        lines.append(f"stored in {engine_dir / 'build.json'}")
    return "\n".join(lines)
