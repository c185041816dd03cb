"""`make gpu-check` on the host, without a GPU or a Docker engine: the dry run executes every step
that needs no GPU (the driver check against a fixture, the build context and args, the
calibration data) and writes the report; the recommended path comes first, NVIDIA's entrypoint
runs, every image setting comes from one table, and .env agrees with it.  What the GPU steps do
on a GPU host is not confirmed here."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench import gpu_check_host as host
from bench.gpu_check_plan import BUDGET_S, RUN_BUDGET_S, in_budget_s, time_plan
from build_engines.calibration_data import (
    CalibrationDataError,
    check_calibration_dataset,
    write_calibration_dataset,
)
from build_engines.images.gpu_images import GpuImageError, check_order, env_file_problems, gpu_image
from build_engines.trtllm.versions import read_env_file
from contract.upstream.ngc_containers import load_ngc_containers

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = "/opt/nvidia/nvidia_entrypoint.sh"
H100_R580 = "580.95.05, NVIDIA H100 80GB HBM3, 81559"


def _dry_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`make gpu-check-dry-run` as CI runs it: the host's python3, standard library only."""
    out = tmp_path / "gpu-check"
    extra = " ".join([f"--out={out}", *args])
    result = subprocess.run(["make", "-s", "gpu-check-dry-run", f"GPU_CHECK_ARGS={extra}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    report = out / "report.json"
    return result, json.loads(report.read_text()) if report.is_file() else {}


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_dry_run_checks_the_recommended_path_first_through_nvidias_entrypoint(tmp_path):
    result, report = _dry_run(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert report["dry_run"] is True and report["ok"] is True
    # the PyTorch backend on the newest image first, then the engine flow on 25.12
    assert [(i["release"], i["backend"]) for i in report["images"]] == [
        ("26.07", "tensorrt_llm_pytorch"), ("25.12", "tensorrt_llm")]
    assert report["images"][0]["compose_env"] == {
        "TRITON_IMAGE": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", "TRTLLM_VERSION": "1.2.1",
        "KIT_GPU_IMAGE": "llama-triton-kit-trtllm:26.07", "MODELOPT_EXAMPLES_REF": "0.37.0"}
    steps = {s["step"]["id"]: s for s in report["steps"]}
    assert list(steps) == ["driver", "26.07/image", "26.07/calibration", "26.07/fp16", "26.07/fp8",
                           "25.12/image", "25.12/calibration", "25.12/fp16", "25.12/fp8"]
    # what needs no GPU ran here and passed; the GPU steps are marked not run
    for step_id, step in steps.items():
        expected = "not run" if step["step"]["needs_gpu"] else "pass"
        assert step["status"] == expected, (step_id, step)
    assert "590.48.01" in steps["driver"]["detail"] and "fixture" in steps["driver"]["detail"]
    # the exact commands: the image's settings from the table, NVIDIA's entrypoint, offline
    run = steps["26.07/fp16"]["command"]
    assert run[:5] == ["env", "TRITON_IMAGE=nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3",
                       "TRTLLM_VERSION=1.2.1", "KIT_GPU_IMAGE=llama-triton-kit-trtllm:26.07",
                       "MODELOPT_EXAMPLES_REF=0.37.0"]
    assert run[run.index("--entrypoint") + 1] == ENTRYPOINT
    assert run[run.index("builder") + 1:run.index("builder") + 4] == ["python3", "-m", "bench.gpu_check"]
    assert "HF_HUB_OFFLINE=1" in run and "HF_DATASETS_OFFLINE=1" in run
    assert steps["26.07/image"]["command"][-4:] == ["--profile", "build", "build", "builder"]
    # the calibration data was made and reads back
    made = Path(re.search(r"rows at (\S+)", steps["26.07/calibration"]["detail"]).group(1))
    assert check_calibration_dataset(made).rows == 512
    text = (tmp_path / "gpu-check" / "report.md").read_text()
    assert text.startswith("# GPU check: DRY RUN PASS") and "| 26.07/fp8 |" in text and "not run" in text
    assert "total 900 s of a 900 s budget" in result.stdout  # the time plan, printed


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_one_variable_chooses_the_image_and_the_report_names_the_other_as_not_run(tmp_path):
    result, report = _dry_run(tmp_path, "--image", "25.12")
    assert result.returncode == 0, result.stderr
    assert [i["release"] for i in report["images"]] == ["25.12"]
    assert report["images"][0]["compose_env"]["MODELOPT_EXAMPLES_REF"] == ""
    assert any(n.startswith("26.07 (tensorrt_llm_pytorch)") for n in report["not_run"])


def test_a_driver_too_old_fails_before_any_build_naming_found_needed_and_image(tmp_path):
    code = host.main(["--dry-run", f"--out={tmp_path}", "--nvidia-smi-output", H100_R580])
    report = json.loads((tmp_path / "report.json").read_text())
    driver = report["steps"][0]
    assert code == 1 and driver["status"] == "fail"
    assert "GPU_IMAGE=26.07" in driver["detail"] and "580.95.05" in driver["detail"]
    assert ">= 590.44.01" in driver["detail"] and "tritonserver:26.07-trtllm-python-py3" in driver["detail"]
    assert all(s["status"] == "not run" for s in report["steps"][1:])  # nothing built after it
    # the same host runs the engine-flow image (25.12 needs 580.95.05)
    assert host.main(["--dry-run", f"--out={tmp_path / 'e'}", "--image", "25.12", "--nvidia-smi-output",
                      H100_R580]) == 0


def test_the_driver_requirements_are_the_compatibility_matrix():
    containers = load_ngc_containers()
    assert (containers.driver("26.07").cuda_version, containers.driver("26.07").min_driver) == ("13.1.0.036", "590.44.01")
    assert (containers.driver("25.12").cuda_version, containers.driver("25.12").min_driver) == ("13.0.2.006", "580.95.05")
    assert containers.driver("26.07").citation.source.commit.startswith("819ee377")
    assert containers.entrypoint.path == ENTRYPOINT
    assert containers.driver("26.07").problem("590.44.01") is None
    assert containers.driver("26.07").problem("610.1") is None
    assert "590.44.01" in containers.driver("26.07").problem("590.44.0")


def test_nvidia_smi_rows_parse_with_and_without_units():
    gpus = host.parse_nvidia_smi("590.48.01, NVIDIA H100 80GB HBM3, 81559 MiB\n590.48.01, NVIDIA H100, 81559\n")
    assert [(g.driver, g.memory_mib) for g in gpus] == [("590.48.01", 81559)] * 2
    with pytest.raises(host.HostCheckError, match="expected 'driver_version, name, memory.total'"):
        host.parse_nvidia_smi("590.48.01, H100")


def test_every_image_setting_comes_from_the_table_and_env_agrees():
    recommended, engine = check_order()
    assert (recommended.release, recommended.backend.value) == ("26.07", "tensorrt_llm_pytorch")
    assert (engine.release, engine.backend.value) == ("25.12", "tensorrt_llm")
    assert env_file_problems(read_env_file(ROOT / ".env")) == []
    # forgetting one of the four edits is what the table prevents
    bad = recommended.compose_env() | {"MODELOPT_EXAMPLES_REF": ""}
    assert env_file_problems(bad) == ["MODELOPT_EXAMPLES_REF='': Triton 26.07 needs MODELOPT_EXAMPLES_REF='0.37.0'"]
    with pytest.raises(GpuImageError, match="'GPU_IMAGE' '24.01'"):
        gpu_image("24.01")


def test_compose_defaults_are_the_env_files_image():
    """docker-compose.yml's ${VAR:-default} fallbacks name the same image as .env."""
    env = read_env_file(ROOT / ".env")
    compose = (ROOT / "docker-compose.yml").read_text()
    for name in ("TRITON_IMAGE", "TRTLLM_VERSION", "KIT_GPU_IMAGE"):
        defaults = set(re.findall(rf"\$\{{{name}:-([^}}]*)\}}", compose))
        assert defaults == {env[name]}, (name, defaults)


def test_the_build_context_check_finds_a_missing_copy_and_a_skipped_entrypoint(tmp_path):
    for name in ("docker-compose.yml", ".dockerignore"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "docker").mkdir()
    shutil.copy(ROOT / "docker" / "gpu.Dockerfile", tmp_path / "docker" / "gpu.Dockerfile")
    image = gpu_image("26.07")
    problems, _ = host.build_context_problems(image, tmp_path)
    assert "COPY requirements: not in the build context" in " ".join(problems)
    assert host.build_context_problems(image, ROOT)[0] == []
    compose = (ROOT / "docker-compose.yml").read_text()
    (tmp_path / "docker-compose.yml").write_text(compose.replace(
        f'entrypoint: ["{ENTRYPOINT}", "python3", "-m", "build_engines"]', 'entrypoint: ["python3", "-m", "build_engines"]'))
    assert any("skips /opt/nvidia/nvidia_entrypoint.sh" in p for p in host.build_context_problems(image, tmp_path)[0])


def test_no_recipe_skips_nvidias_entrypoint():
    for name in ("Makefile", "docker-compose.yml"):
        assert "--entrypoint python3" not in (ROOT / name).read_text(), name
        assert '["python3", "-m", "build_engines"]' not in (ROOT / name).read_text(), name


def test_the_time_plan_fits_15_minutes_on_one_h100():
    plan = time_plan([(i.release, i.backend.value) for i in check_order()])
    assert in_budget_s(plan) <= BUDGET_S == 900
    assert all(not s.in_budget for s in plan if s.id.endswith("/image"))  # pull/build timed apart
    assert {(b, p) for b in ("tensorrt_llm", "tensorrt_llm_pytorch") for p in ("fp16", "fp8")} == set(RUN_BUDGET_S)


def test_calibration_data_is_made_here_and_checked(tmp_path):
    made = write_calibration_dataset(tmp_path, rows=16)
    assert made.directory.name == "cnn_dailymail" and made.rows == 16
    rows = [json.loads(line) for line in (made.directory / "train.jsonl").read_text().splitlines()]
    assert all(r["article"] == r["text"] and len(r["article"]) > 1000 for r in rows)
    assert write_calibration_dataset(tmp_path / "again", rows=16).sha256 == made.sha256  # the same bytes
    with pytest.raises(CalibrationDataError, match="has 16 rows; the calibration takes 512"):
        check_calibration_dataset(made.directory)
    other = tmp_path / "calib"
    shutil.copytree(made.directory, other)
    with pytest.raises(CalibrationDataError, match="must be named 'cnn_dailymail'"):
        check_calibration_dataset(other, rows=16)


def test_both_upstream_loaders_read_the_local_calibration_data(tmp_path, monkeypatch):
    """The exact load_dataset calls of ModelOpt 0.37.0's hf_ptq.py and TensorRT-LLM's quantize.py,
    offline, where `datasets` is installed (it is in the GPU images, not in the kit's venv)."""
    datasets = pytest.importorskip("datasets")
    made = write_calibration_dataset(tmp_path, rows=8)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    streamed = datasets.load_dataset(streaming=True, path="cnn_dailymail", name="3.0.0", split="train")
    assert len([s["article"] for s in streamed]) == 8
    # (a cache of its own: offline, datasets reuses any cached cnn_dailymail/3.0.0 it finds)
    loaded = datasets.load_dataset(str(made.directory), name="3.0.0", split="train", cache_dir=str(tmp_path / "cache"))
    assert len(loaded["article"]) == 8


def test_the_settings_of_a_release_print_for_compose(capsys):
    from build_engines.images import gpu_images

    assert gpu_images.main(["26.07"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{k}={v}" for k, v in gpu_image("26.07").compose_env().items()]
    assert gpu_images.main(["nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"]) == 0
    assert "MODELOPT_EXAMPLES_REF=\n" in capsys.readouterr().out + "\n"
