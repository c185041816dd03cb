"""`plan` for TensorRT-LLM: the exact commands for every precision and for TP=2, and the
memory arithmetic.

Every flag we emit must be one the pinned tools define, with a value they accept: the
flags and values come from the conformance table of the spec's TensorRT-LLM version
(contract/upstream/data/trtllm_build_<version>.json), not from a list kept here.
"""

from pathlib import Path

import pytest

from build_engines.gpu.capacity import CapacityError, estimate, kv_bytes_per_token_per_gpu, weight_bytes
from build_engines.gpus import GpuTarget
from build_engines.spec_base import EngineLimits, Precision
from build_engines.trtllm.plan import (
    BuildPaths,
    ConformanceError,
    Step,
    checked,
    checkpoint_step,
    engine_step,
    find_examples_dir,
    plan_steps,
)
from build_engines.trtllm.options import KvCacheDtype, TrtLlmPlugins, TrtLlmServing
from contract.upstream.trtllm_build import load_build_table, supported_versions
from tests.unit.trtllm_fixtures import LLAMA_3_KV_HEADS, info_of, llama_8b_checkpoint, trtllm_spec

# Prompts fit one engine step: an int8 KV cache turns chunked context off (see test_trtllm_rules).
WHOLE_PROMPTS = EngineLimits(max_num_tokens=1536)


def table_flags(version: str, tool: str) -> set[str]:
    return {flag for (t, flag) in load_build_table(version).flags if t == tool}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return llama_8b_checkpoint(tmp_path_factory.mktemp("llama8b"))


PATHS = BuildPaths(Path("/w/ckpt"), Path("/w/engine.partial"), Path("/app/examples"))


def flags(argv) -> set[str]:
    return {a for a in argv if a.startswith("--")}


def arg(argv, flag):
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("version", supported_versions())
@pytest.mark.parametrize("precision,options,tool,expected", [
    (Precision.FP16, {}, "convert_checkpoint", {"--dtype": "float16"}),
    (Precision.BF16, {}, "convert_checkpoint", {"--dtype": "bfloat16"}),
    (Precision.INT8_WO, {}, "convert_checkpoint", {"--dtype": "bfloat16", "--weight_only_precision": "int8"}),
    (Precision.FP8, dict(calib_dataset="cnn_dailymail", kv_cache_dtype=KvCacheDtype.FP8), "quantize",
     {"--qformat": "fp8", "--kv_cache_dtype": "fp8", "--calib_dataset": "cnn_dailymail", "--calib_size": "512"}),
    (Precision.INT8_SQ, dict(calib_dataset="/data/calib"), "quantize", {"--qformat": "int8_sq"}),
    (Precision.INT4_AWQ, dict(calib_dataset="/data/calib"), "quantize", {"--qformat": "int4_awq", "--awq_block_size": "128"}),
    (Precision.FP16, dict(calib_dataset="d", kv_cache_dtype=KvCacheDtype.INT8), "quantize",
     {"--qformat": "full_prec", "--kv_cache_dtype": "int8", "--dtype": "float16"}),
    (Precision.INT8_WO, dict(calib_dataset="d", kv_cache_dtype=KvCacheDtype.INT8), "quantize", {"--qformat": "int8_wo"}),
])
def test_checkpoint_step_per_precision(ckpt, version, precision, options, tool, expected):
    spec = trtllm_spec(ckpt, precision, limits=WHOLE_PROMPTS, version=version, **options)
    spec.validate(info_of(ckpt))
    step = checkpoint_step(spec, info_of(ckpt), PATHS)
    argv = step.argv
    script = "/app/examples/quantization/quantize.py" if tool == "quantize" else \
        "/app/examples/models/core/llama/convert_checkpoint.py"
    assert argv[:2] == ("python3", script) and step.tool == tool
    assert flags(argv) <= table_flags(version, tool)
    assert load_build_table(version).check_argv(tool, argv[2:]) == []  # every value accepted too
    for flag, value in expected.items():
        assert arg(argv, flag) == value, flag
    assert (arg(argv, "--model_dir"), arg(argv, "--output_dir")) == (str(ckpt), "/w/ckpt")
    if precision in (Precision.FP16, Precision.BF16) and tool == "convert_checkpoint":
        assert "--use_weight_only" not in argv


@pytest.mark.parametrize("version", supported_versions())
@pytest.mark.parametrize("precision,options", [
    (Precision.FP16, {}), (Precision.BF16, {}), (Precision.INT8_WO, {}),
    (Precision.FP8, dict(calib_dataset="c")), (Precision.INT8_SQ, dict(calib_dataset="c")),
    (Precision.INT4_AWQ, dict(calib_dataset="c")),
])
def test_engine_step_per_precision(ckpt, version, precision, options):
    spec = trtllm_spec(ckpt, precision, version=version, **options)
    argv = engine_step(spec, PATHS).argv
    assert argv[0] == "trtllm-build" and flags(argv) <= table_flags(version, "trtllm-build")
    assert load_build_table(version).check_argv("trtllm-build", argv[1:]) == []
    limits = EngineLimits()
    for flag, value in {"--checkpoint_dir": "/w/ckpt", "--output_dir": "/w/engine.partial",
                        "--max_batch_size": str(limits.max_batch_size), "--max_input_len": str(limits.max_input_len),
                        "--max_seq_len": str(limits.max_seq_len), "--max_num_tokens": str(limits.max_num_tokens),
                        "--kv_cache_type": "paged", "--use_paged_context_fmha": "enable", "--gemm_plugin": "auto",
                        "--remove_input_padding": "enable", "--workers": "1"}.items():
        assert arg(argv, flag) == value, flag
    # FP8 context FMHA needs an fp8 KV cache beside paged context FMHA: never asked for without one
    assert arg(argv, "--use_fp8_context_fmha") == "disable"


@pytest.mark.parametrize("version", supported_versions())
def test_every_flag_of_every_plan_is_the_tables(ckpt, version):
    """The whole matrix of specs the kit plans: each argv is accepted by that version's tools."""
    table = load_build_table(version)
    for precision in (Precision.FP16, Precision.BF16, Precision.FP8, Precision.INT8_SQ, Precision.INT8_WO,
                      Precision.INT4_AWQ):
        for kv in KvCacheDtype:
            for tp in (1, 2):
                spec = trtllm_spec(ckpt, precision, limits=WHOLE_PROMPTS, version=version, tp_size=tp,
                                   kv_cache_dtype=kv, calib_dataset="c",
                                   plugins=TrtLlmPlugins(reduce_fusion=tp > 1))
                spec.validate(info_of(ckpt))
                for step in plan_steps(spec, info_of(ckpt), PATHS)[:2]:
                    assert table.check_argv(step.tool, step.argv[1:]) == [], (precision, kv, tp, step.argv)


def test_a_flag_the_tools_lack_is_refused_at_plan_time(ckpt):
    spec = trtllm_spec(ckpt)
    with pytest.raises(ConformanceError, match=r"trtllm-build --use_magic is not a flag of TensorRT-LLM 1\.1\.0"):
        checked(spec, Step("build", ("trtllm-build", "--use_magic", "enable"), "trtllm-build"))
    with pytest.raises(ConformanceError, match=r"--kv_cache_type accepts \['continuous', 'paged', 'disabled'\]"):
        checked(spec, Step("build", ("trtllm-build", "--kv_cache_type", "pagd"), "trtllm-build"))


def test_fp8_context_fmha_follows_the_kv_cache(ckpt):
    """Item 4: --use_fp8_context_fmha enable only with FP8 weights and an fp8 KV cache."""
    fp8_kv = trtllm_spec(ckpt, Precision.FP8, kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="c")
    auto_kv = trtllm_spec(ckpt, Precision.FP8, calib_dataset="c")
    assert arg(engine_step(fp8_kv, PATHS).argv, "--use_fp8_context_fmha") == "enable"
    assert arg(engine_step(auto_kv, PATHS).argv, "--use_fp8_context_fmha") == "disable"


def test_int8_kv_plans_no_paged_context_fmha(ckpt):
    """Item 1: the plan emits what the builder will do, not what it will override."""
    spec = trtllm_spec(ckpt, limits=WHOLE_PROMPTS, kv_cache_dtype=KvCacheDtype.INT8, calib_dataset="c")
    assert arg(engine_step(spec, PATHS).argv, "--use_paged_context_fmha") == "disable"


def test_tp6_over_3_kv_heads_plans_duplicated_heads(tmp_path):
    """Item 5: TP 6 on 3 KV heads is planned; each GPU holds one (duplicated) KV head."""
    ckpt = llama_8b_checkpoint(tmp_path / "kv3", LLAMA_3_KV_HEADS)
    spec = trtllm_spec(ckpt, Precision.BF16, tp_size=6)
    spec.validate(info_of(ckpt))
    convert, build = (s.argv for s in plan_steps(spec, info_of(ckpt), PATHS)[:2])
    assert arg(convert, "--tp_size") == "6" and arg(build, "--workers") == "6"
    # K and V x 28 layers x 1 KV head x 128 dims x 2 bytes, not 0 (3 // 6)
    assert kv_bytes_per_token_per_gpu(info_of(ckpt), spec) == 2 * 28 * 1 * 128 * 2
    cap = estimate(info_of(ckpt), spec)
    assert cap.kv_heads_per_gpu == 1 and "each KV head duplicated on 2 GPUs" in "\n".join(cap.lines(spec))


def test_tp2_plan(ckpt):
    spec = trtllm_spec(ckpt, Precision.BF16, tp_size=2, plugins=TrtLlmPlugins(reduce_fusion=True))
    spec.validate(info_of(ckpt))
    steps = plan_steps(spec, info_of(ckpt), PATHS)
    convert, build = steps[0].argv, steps[1].argv
    assert (arg(convert, "--tp_size"), arg(convert, "--pp_size"), arg(convert, "--workers")) == ("2", "1", "2")
    assert arg(build, "--workers") == "2" and arg(build, "--reduce_fusion") == "enable"
    assert len(steps) == 4 and not steps[2].argv and not steps[3].argv  # in-process steps


def test_paged_context_fmha_off_is_passed_on(ckpt):
    spec = trtllm_spec(ckpt, use_paged_context_fmha=False,
                       serving=TrtLlmServing(enable_kv_cache_reuse=False, enable_chunked_context=False))
    assert arg(engine_step(spec, PATHS).argv, "--use_paged_context_fmha") == "disable"


def test_examples_dir_setting(tmp_path):
    assert find_examples_dir({"TRTLLM_EXAMPLES_DIR": "/opt/trtllm/examples"}) == Path("/opt/trtllm/examples")
    assert find_examples_dir({}) in (Path("/app/examples"), Path("/app/tensorrt_llm/examples"))


def test_memory_arithmetic(ckpt):
    info = info_of(ckpt)
    # Llama-3.1-8B: K and V x 32 layers x 8 KV heads x 128 dims x 2 bytes = 128 KiB per token
    assert kv_bytes_per_token_per_gpu(info, trtllm_spec(ckpt)) == 131072
    # FP8 KV cache and TP=2: a quarter of that per GPU
    assert kv_bytes_per_token_per_gpu(info, trtllm_spec(ckpt, tp_size=2, kv_cache_dtype=KvCacheDtype.FP8)) == 32768
    assert 15.5e9 < weight_bytes(info, "bf16") < 16.5e9  # ~8.0B parameters x 2 bytes
    assert weight_bytes(info, "int4_awq") < weight_bytes(info, "fp8") < weight_bytes(info, "bf16")


def test_capacity_on_a_24_gib_gpu(ckpt):
    cap = estimate(info_of(ckpt), trtllm_spec(ckpt, Precision.BF16, "L4"))
    # (24 GiB - ~14.96 GiB weights - 2 GiB reserve) x 0.9 / 128 KiB per token
    assert 6.0 < cap.kv_pool_gib_per_gpu < 6.6 and cap.kv_tokens % 32 == 0
    assert cap.max_full_sequences == cap.kv_tokens // 2048 and cap.concurrent_sequences == min(32, cap.max_full_sequences)
    lower_fraction = estimate(info_of(ckpt), trtllm_spec(ckpt, Precision.BF16, "L4",
                                                         serving=TrtLlmServing(kv_cache_free_gpu_mem_fraction=0.5)))
    assert lower_fraction.kv_tokens < cap.kv_tokens


def test_weights_that_do_not_fit_are_reported(ckpt):
    spec = trtllm_spec(ckpt, Precision.BF16, gpu=GpuTarget("12 GiB card", 89, 12, 1))
    with pytest.raises(CapacityError, match="raise 'tp_size'/'pp_size' or pick a smaller 'precision'"):
        estimate(info_of(ckpt), spec)


@pytest.mark.parametrize("image,version,tensorrt", [("25.12", "1.1.0", "10.13.3.9"), ("26.07", "1.2.1", "10.14.1.48")])
def test_plan_report_names_the_image_and_the_effective_engine(ckpt, image, version, tensorrt):
    from build_engines.plan_report import plan_lines

    spec = trtllm_spec(ckpt, Precision.FP8, trtllm_version=version, triton_release=image, calib_dataset="c")
    text = "\n".join(plan_lines(spec, info_of(ckpt), Path("/w/engine")))
    assert f"image: nvcr.io/nvidia/tritonserver:{image}-trtllm-python-py3 (TensorRT-LLM {version}, TensorRT {tensorrt})" in text
    assert f"contract/upstream/data/trtllm_build_{version}.json" in text
    assert "overridden by upstream: use_fp8_context_fmha: enable -> disable" in text
    assert "--use_fp8_context_fmha disable" in text and "--use_fp8_context_fmha enable" not in text


def test_plan_report_states_chunking_and_reuse_are_off(ckpt):
    from build_engines.plan_report import plan_lines

    spec = trtllm_spec(ckpt, limits=WHOLE_PROMPTS, kv_cache_dtype=KvCacheDtype.INT8, calib_dataset="c")
    text = "\n".join(plan_lines(spec, info_of(ckpt), Path("/w/engine")))
    assert "enable_chunked_context false, enable_kv_cache_reuse false" in text
    assert "chunked context and KV-cache reuse are off: a prompt longer than max_num_tokens=1536 is rejected" in text
    assert "builder.py L1164-1169" in text and "--use_paged_context_fmha disable" in text
