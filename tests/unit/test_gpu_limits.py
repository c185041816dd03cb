"""GPU limits sized for the GPU (issue 33 item 7): the GPU plans start from upstream's defaults
of their TensorRT-LLM version (contract/upstream/data/gpu_limit_defaults.json) and size
max_batch_size, max_num_tokens and max_seq_len from the GPU's memory, the model's context and
the KV-cache budget the plan computes, the way trtllm-bench derives its build settings; each
value says in the plan why it was chosen; the CPU keeps its own; an explicit flag always wins.

The two plans a new user would try first, with a Llama-3.1-8B config on one H100:

    plan --backend tensorrt_llm --precision fp8 --kv-cache-dtype fp8 --gpu H100-SXM
    plan --backend tensorrt_llm_pytorch --image 26.07 --gpu H100-SXM
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from build_engines.cli import main
from tests.unit.trtllm_fixtures import LLAMA_8B, llama_8b_checkpoint

LLAMA_31_8B = LLAMA_8B | {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return llama_8b_checkpoint(tmp_path_factory.mktemp("llama31") / "Llama-3.1-8B", LLAMA_31_8B)


def plan(*args: str) -> str:
    result = CliRunner().invoke(main, ["plan", *args])
    assert result.exit_code == 0, result.output
    return result.output


def flag(text: str, name: str) -> int:
    return int(re.search(rf"{name} (\d+)", text).group(1))


def llm_kwarg(text: str, name: str) -> int:
    return int(re.search(rf"\b{name}=(\d+)", text).group(1))


ENGINE_FP8 = ("--backend", "tensorrt_llm", "--precision", "fp8", "--kv-cache-dtype", "fp8", "--gpu", "H100-SXM",
              "--calib-dataset", "cnn_dailymail", "--image", "25.12")
PYTORCH = ("--backend", "tensorrt_llm_pytorch", "--image", "26.07", "--gpu", "H100-SXM")


def test_the_engine_plan_is_sized_for_an_h100(ckpt):
    """FP8 weights and KV cache: ~1.03M KV tokens = 500 sequences of 2,048 tokens, so
    trtllm-bench's rounding gives 512 (under upstream's 2048); max_num_tokens keeps upstream's
    8192; max_seq_len is the model's whole context (131072), as trtllm-build deduces it."""
    text = plan("--checkpoint", str(ckpt), *ENGINE_FP8)
    build = next(line for line in text.splitlines() if line.lstrip().startswith("trtllm-build"))
    assert flag(build, "--max_batch_size") == 512
    assert flag(build, "--max_num_tokens") == 8192
    assert flag(build, "--max_seq_len") == 131072
    assert flag(build, "--max_input_len") == 131071  # chunked context: the executor takes max_seq_len - 1
    assert "longest prompt 131071 tokens" in text


def test_the_pytorch_plan_is_sized_for_an_h100(ckpt):
    """16-bit weights and KV cache: ~465k KV tokens = 226 sequences of 2,048 tokens -> 256."""
    text = plan("--checkpoint", str(ckpt), *PYTORCH)
    llm = next(line for line in text.splitlines() if line.startswith("engine model tensorrt_llm_pytorch"))
    assert (llm_kwarg(llm, "max_batch_size"), llm_kwarg(llm, "max_num_tokens"), llm_kwarg(llm, "max_seq_len")) == \
        (256, 8192, 131072)


@pytest.mark.parametrize("args", [ENGINE_FP8, PYTORCH], ids=["engine", "pytorch"])
def test_the_plan_says_why_each_limit_was_chosen(ckpt, args):
    text = plan("--checkpoint", str(ckpt), *args)
    limits = [line for line in text.splitlines() if line.startswith("limit ")]
    assert [line.split()[1] for line in limits] == ["max_seq_len", "max_batch_size", "max_num_tokens", "max_input_len"]
    assert "the model's context" in limits[0] and "131072" in limits[0]
    assert "trtllm-bench" in limits[1] and "2048" in limits[1]  # upstream's default, lowered by the KV budget
    assert "8192" in limits[2]
    assert re.search(r"contract/upstream/data/gpu_limits_1\.(1\.0|2\.1)\.json", text)


def test_an_explicit_flag_always_wins(ckpt):
    text = plan("--checkpoint", str(ckpt), *ENGINE_FP8, "--max-batch-size", "8", "--max-seq-len", "4096")
    build = next(line for line in text.splitlines() if line.lstrip().startswith("trtllm-build"))
    assert (flag(build, "--max_batch_size"), flag(build, "--max_seq_len")) == (8, 4096)
    assert flag(build, "--max_input_len") == 4095 and flag(build, "--max_num_tokens") == 8192
    line = next(x for x in text.splitlines() if x.startswith("limit max_batch_size"))
    assert "given" in line and "512" in line  # what sizing would have chosen


def test_the_cpu_keeps_its_own_defaults(ckpt):
    from build_engines.cli_options import make_spec
    from build_engines.spec_base import EngineLimits

    spec = make_spec(ckpt, backend="openvino", default_max_tokens=256, prefix_caching=False)
    assert spec.limits == EngineLimits()


def test_the_kv_pool_caps_max_seq_len_on_a_small_gpu(ckpt):
    """bf16 weights of an 8B model on a 24 GiB L4 leave ~6.3 GiB of KV cache, ~51k tokens: less
    than the 131072-token context, so one full-length sequence must fit."""
    text = plan("--checkpoint", str(ckpt), "--backend", "tensorrt_llm", "--precision", "bf16", "--gpu", "L4",
                "--image", "25.12")
    tokens = int(re.search(r"= ([\d,]+) tokens", text).group(1).replace(",", ""))
    build = next(line for line in text.splitlines() if line.lstrip().startswith("trtllm-build"))
    assert flag(build, "--max_seq_len") == tokens < 131072 and tokens % 32 == 0
    assert flag(build, "--max_batch_size") == 64  # trtllm-bench's floor


def test_upstream_defaults_are_cited_per_version():
    from build_engines.gpu.limit_table import upstream_limits

    for version in ("1.1.0", "1.2.1"):
        up = upstream_limits(version)
        assert (up.max_batch_size, up.max_num_tokens) == (2048, 8192)
        for name in ("max_batch_size", "max_num_tokens", "max_seq_len", "trtllm_bench"):
            assert "NVIDIA/TensorRT-LLM" in str(up.citation(name)), name


@pytest.mark.parametrize("requests,isl,osl,expected", [
    (500.7, 1024, 1024, (512, 2048)),  # 128 x ceil(raw / 128) between 256 and 1024; tokens at least 2048
    (226.9, 1024, 1024, (256, 2048)),  # 32 x ceil(raw / 32) under 256
    (20.0, 1024, 1024, (64, 2048)),  # at least 64
    (3000.0, 128, 128, (3072, 6144)),  # 256 x ceil(raw / 256) from 1024; tokens 512 x ceil in [4096, 8192)
    (9000.0, 128, 128, (4096, 8192)),  # requests capped at 4096; tokens 1024 x ceil from 8192
    (9000.0, 4000, 100, (4096, 32768)),  # tokens capped at 32768
])
def test_trtllm_bench_rounding(requests, isl, osl, expected):
    from build_engines.gpu.limit_table import upstream_limits

    assert upstream_limits("1.2.1").bench.tune(requests, isl, osl, pp_size=1) == expected


def test_the_draft_model_s_context_bounds_a_draft_target_engine(tmp_path, ckpt):
    draft = llama_8b_checkpoint(tmp_path / "draft", {**LLAMA_8B, "num_hidden_layers": 2,
                                                     "max_position_embeddings": 8192})
    text = plan("--checkpoint", str(ckpt), "--backend", "tensorrt_llm", "--gpu", "H100-SXM", "--image", "25.12",
                "--speculative-decoding", "draft_tokens_external", "--draft-checkpoint", str(draft))
    build = next(line for line in text.splitlines() if line.lstrip().startswith("trtllm-build"))
    assert flag(build, "--max_seq_len") == 8192


def test_eagle_engines_keep_trtllm_build_s_batch_bound(ckpt, tmp_path):
    heads = tmp_path / "eagle"
    heads.mkdir()
    (heads / "config.json").write_text(json.dumps(LLAMA_8B | {"num_hidden_layers": 1}))
    (heads / "model.safetensors").write_bytes(b"")
    # 16-bit on a 180 GiB B200: ~1.2M KV tokens, 586 sequences of 2,048 -> trtllm-bench's 640, over EAGLE's 512
    text = plan("--checkpoint", str(ckpt), "--backend", "tensorrt_llm", "--gpu", "B200", "--image", "25.12",
                "--speculative-decoding", "eagle", "--eagle-model-dir", str(heads))
    build = next(line for line in text.splitlines() if line.lstrip().startswith("trtllm-build"))
    assert flag(build, "--max_batch_size") == 512  # row eagle_builder_limits
