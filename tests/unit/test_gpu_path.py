"""The recommended GPU path (issue 33): `--backend gpu` - what `make build-engine` asks for on a
GPU - takes TensorRT-LLM's PyTorch backend on the images that have it (26.04 - 26.07), the
TensorRT-engine flow on the images without it (25.12 - 26.02) and for what only it builds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from build_engines.gpu.path import choose_gpu_backend
from build_engines.spec_base import EngineBackend, SpecError

ROOT = Path(__file__).resolve().parents[2]
PYTORCH, ENGINE = EngineBackend.TENSORRT_LLM_PYTORCH, EngineBackend.TENSORRT_LLM


@pytest.mark.parametrize("options,expected", [
    ({"triton_image": "26.07"}, PYTORCH),
    ({"triton_image": "26.04", "precision": "fp8"}, PYTORCH),
    ({"triton_image": "25.12"}, ENGINE),  # TensorRT-LLM 1.1.0: no PyTorch-backend support in the kit
    ({"triton_image": "26.02", "precision": "fp8"}, ENGINE),
    ({"triton_image": "26.07", "precision": "int8_sq"}, ENGINE),  # only the engine flow builds it
    ({"triton_image": "26.07", "kv_cache_dtype": "int8"}, ENGINE),
    ({"triton_image": "26.07", "speculative_decoding": "lookahead_decoding"}, ENGINE),
    ({"triton_image": "26.07", "draft_checkpoint": Path("/d")}, ENGINE),
    ({"triton_image": "25.12", "pt_speculative_decoding": "ngram"}, PYTORCH),  # validation then names the image
    ({"triton_image": "26.07", "precision": "nvfp4"}, PYTORCH),
])
def test_the_flow_gpu_picks(options, expected):
    backend, why = choose_gpu_backend(options)
    assert backend == expected, why
    assert why


def test_asking_for_both_flows_is_refused_naming_both():
    with pytest.raises(SpecError, match=r"\['--precision int8_wo'\] need the engine flow.*'pt_speculative_decoding'"):
        choose_gpu_backend({"triton_image": "26.07", "precision": "int8_wo", "pt_speculative_decoding": "ngram"})


def test_plan_says_which_flow_and_why(tmp_path):
    from build_engines.cli import main
    from tests.unit.trtllm_fixtures import llama_8b_checkpoint

    ckpt = llama_8b_checkpoint(tmp_path / "llama")
    result = CliRunner().invoke(main, ["plan", "--checkpoint", str(ckpt), "--backend", "gpu",
                                                       "--image", "26.07", "--gpu", "H100-SXM"])
    assert result.exit_code == 0, result.output + result.stderr
    assert "backend: tensorrt_llm_pytorch (--backend gpu:" in result.stderr and "recommended" in result.stderr
    assert "engine model tensorrt_llm_pytorch: LLM(" in result.stdout
    older = CliRunner().invoke(main, ["plan", "--checkpoint", str(ckpt), "--backend", "gpu",
                                                      "--image", "25.12", "--gpu", "H100-SXM"])
    assert older.exit_code == 0 and "backend: tensorrt_llm (--backend gpu:" in older.stderr
    assert "trtllm-build --checkpoint_dir" in older.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("variables,backend", [
    (["GPU=1"], "--backend gpu"), (["PRECISION=fp8"], "--backend gpu"), (["TP=2"], "--backend gpu"),
    (["PRECISION=nvfp4"], "--backend gpu"), (["BACKEND=tensorrt_llm"], "build_engines.dispatch"),
    ([], "--backend openvino"), (["PRECISION=int4"], "--backend openvino"),
])
def test_make_build_engine_asks_for_the_gpu_path(variables, backend):
    # --no-print-directory: under another make (`make test`, CI) a nested make prints "Leaving directory"
    result = subprocess.run(["make", "-n", "--no-print-directory", "build-engine", "MODEL=/models/m", *variables],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    command = [line for line in result.stdout.splitlines() if "build_engines" in line][-1]
    assert backend in command, command
