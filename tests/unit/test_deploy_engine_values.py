"""The engine's build.json decides the GPUs per replica; `python -m deploy` ties it together."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from contract.build_record import BuildRecord
from deploy.cli import main
from deploy.engine_values import EngineValuesError, engine_values
from deploy.parallelism import Parallelism, ParallelismError, parallelism_from_spec


def write_record(path, spec, backend="tensorrt_llm"):
    path.mkdir(parents=True, exist_ok=True)
    BuildRecord(backend=backend, spec=spec, checkpoint={}, versions={}, built_at="2026-11-22T00:00:00Z",
                build_seconds=1.0).write(path)
    return path


@pytest.mark.parametrize("spec, expected", [
    ({"backend": "tensorrt_llm", "precision": "fp8"}, Parallelism(1, 1)),  # before TP/PP existed
    ({"tp_size": 2}, Parallelism(2, 1)),
    ({"tensor_parallel_size": 4, "pipeline_parallel_size": 2}, Parallelism(4, 2)),
    ({"tensorrt_llm": {"tp_size": 8, "pp_size": 1}}, Parallelism(8, 1)),
    ({"parallelism": {"tp_size": 2}, "pp_size": 2}, Parallelism(2, 2)),
    ({"tp_size": None}, Parallelism(1, 1)),
])
def test_parallelism_from_spec(spec, expected):
    assert parallelism_from_spec(spec) == expected


def test_world_size():
    assert Parallelism(4, 2).world_size == 8 and Parallelism().world_size == 1


@pytest.mark.parametrize("spec", [{"tp_size": 0}, {"tp_size": "2"}, {"pp_size": True}, {"tp_size": 2.0},
                                  {"tp_size": 2, "tensorrt_llm": {"tp_size": 4}}])
def test_bad_sizes_are_refused_naming_the_field(spec):
    with pytest.raises(ParallelismError, match="tp_size|pp_size"):
        parallelism_from_spec(spec)


def test_engine_values_from_build_json(tmp_path):
    engine = write_record(tmp_path / "engine", {"tensorrt_llm": {"tp_size": 2, "pp_size": 1}})
    assert engine_values(engine) == {"engine": {"tensorParallelSize": 2, "pipelineParallelSize": 1}}


def test_cpu_engines_are_refused(tmp_path):
    engine = write_record(tmp_path / "engine", {}, backend="openvino")
    with pytest.raises(EngineValuesError, match="openvino"):
        engine_values(engine)


def test_values_command_writes_a_values_file(tmp_path):
    engine = write_record(tmp_path / "engine", {"tp_size": 4})
    out = tmp_path / "engine-values.yaml"
    result = CliRunner().invoke(main, ["values", "--engine-dir", str(engine), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(out.read_text()) == {"engine": {"tensorParallelSize": 4, "pipelineParallelSize": 1}}


def test_values_command_explains_a_missing_build_record(tmp_path):
    result = CliRunner().invoke(main, ["values", "--engine-dir", str(tmp_path)])
    assert result.exit_code != 0 and "build.json" in result.output


def test_template_with_an_engine_dir_requests_its_gpus(tmp_path):
    engine = write_record(tmp_path / "engine", {"tp_size": 2, "pp_size": 2})
    result = CliRunner().invoke(main, ["template", "--engine-dir", str(engine), "--release", "r1"])
    assert result.exit_code == 0, result.output
    deployment = next(d for d in yaml.safe_load_all(result.output) if d["kind"] == "Deployment")
    assert deployment["metadata"]["name"] == "r1-llama-triton"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"


def test_check_command_passes_the_shipped_values_and_fails_a_bad_file(tmp_path):
    result = CliRunner().invoke(main, ["check"])
    assert result.exit_code == 0, result.output
    assert "default values" in result.output and "tp2-hpa-servicemonitor-values.yaml" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("autoscaling:\n  enabled: true\n  minReplicas: 0\n")
    result = CliRunner().invoke(main, ["check", "-f", str(bad)])
    assert result.exit_code != 0 and "minReplicas" in result.output
