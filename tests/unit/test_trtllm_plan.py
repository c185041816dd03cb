"""`plan` for TensorRT-LLM: the exact commands for every precision and for TP=2, and the
memory arithmetic.

Every flag we emit must be one the pinned tools define.  The flag sets below are copied
from TensorRT-LLM 1.1.0 (the version tensorrtllm_backend r25.12 pins):
  examples/quantization/quantize.py (parser.add_argument calls),
  examples/models/core/llama/convert_checkpoint.py (parse_arguments),
  tensorrt_llm/commands/build.py (parse_arguments) + tensorrt_llm/plugin/plugin.py (cli_plugin_args).
"""

from pathlib import Path

import pytest

from build_engines.capacity import CapacityError, estimate, kv_bytes_per_token_per_gpu, weight_bytes
from build_engines.gpus import GpuTarget
from build_engines.spec import EngineLimits, Precision
from build_engines.trtllm_plan import BuildPaths, checkpoint_step, engine_step, find_examples_dir, plan_steps
from build_engines.trtllm_spec import KvCacheDtype, TrtLlmPlugins, TrtLlmServing
from tests.unit.trtllm_fixtures import info_of, llama_8b_checkpoint, trtllm_spec

QUANTIZE_FLAGS = {"--model_dir", "--nemo_ckpt_path", "--decoder_type", "--device", "--device_map", "--calib_dataset",
                  "--calib_tp_size", "--calib_pp_size", "--dtype", "--qformat", "--seed", "--tokenizer_max_seq_length",
                  "--batch_size", "--calib_size", "--calib_max_seq_length", "--output_dir", "--tp_size", "--pp_size",
                  "--cp_size", "--awq_block_size", "--kv_cache_dtype", "--quantize_lm_head", "--export_format"}
QFORMATS = {"nvfp4", "fp8", "int8_sq", "int4_awq", "w4a8_awq", "int8_wo", "int4_wo", "full_prec"}
CONVERT_FLAGS = {"--model_dir", "--meta_ckpt_dir", "--tp_size", "--pp_size", "--cp_size", "--dtype", "--use_weight_only",
                 "--weight_only_precision", "--calib_dataset", "--calib_size", "--int8_kv_cache", "--fp8_kv_cache",
                 "--load_by_shard", "--output_dir", "--workers", "--smoothquant", "--per_channel", "--per_token"}
TRTLLM_BUILD_FLAGS = {"--checkpoint_dir", "--model_config", "--build_config", "--output_dir", "--max_batch_size",
                      "--max_input_len", "--max_seq_len", "--max_beam_width", "--max_num_tokens", "--opt_num_tokens",
                      "--kv_cache_type", "--workers", "--log_level", "--speculative_decoding_mode", "--max_draft_len",
                      # plugin.py cli_plugin_args
                      "--gpt_attention_plugin", "--gemm_plugin", "--context_fmha", "--remove_input_padding",
                      "--tokens_per_block", "--use_paged_context_fmha", "--use_fp8_context_fmha", "--multiple_profiles",
                      "--use_fused_mlp", "--reduce_fusion", "--user_buffer", "--norm_quant_fusion", "--nccl_plugin"}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return llama_8b_checkpoint(tmp_path_factory.mktemp("llama8b"))


PATHS = BuildPaths(Path("/w/ckpt"), Path("/w/engine.partial"), Path("/app/examples"))


def flags(argv) -> set[str]:
    return {a for a in argv if a.startswith("--")}


def arg(argv, flag):
    return argv[argv.index(flag) + 1]


@pytest.mark.parametrize("precision,options,tool,expected", [
    (Precision.FP16, {}, "convert", {"--dtype": "float16"}),
    (Precision.BF16, {}, "convert", {"--dtype": "bfloat16"}),
    (Precision.INT8_WO, {}, "convert", {"--dtype": "bfloat16", "--weight_only_precision": "int8"}),
    (Precision.FP8, dict(calib_dataset="cnn_dailymail", kv_cache_dtype=KvCacheDtype.FP8), "quantize",
     {"--qformat": "fp8", "--kv_cache_dtype": "fp8", "--calib_dataset": "cnn_dailymail", "--calib_size": "512"}),
    (Precision.INT8_SQ, dict(calib_dataset="/data/calib"), "quantize", {"--qformat": "int8_sq"}),
    (Precision.INT4_AWQ, dict(calib_dataset="/data/calib"), "quantize", {"--qformat": "int4_awq", "--awq_block_size": "128"}),
    (Precision.FP16, dict(calib_dataset="d", kv_cache_dtype=KvCacheDtype.INT8), "quantize",
     {"--qformat": "full_prec", "--kv_cache_dtype": "int8", "--dtype": "float16"}),
    (Precision.INT8_WO, dict(calib_dataset="d", kv_cache_dtype=KvCacheDtype.INT8), "quantize", {"--qformat": "int8_wo"}),
])
def test_checkpoint_step_per_precision(ckpt, precision, options, tool, expected):
    spec = trtllm_spec(ckpt, precision, **options)
    spec.validate(info_of(ckpt))
    argv = checkpoint_step(spec, info_of(ckpt), PATHS).argv
    script = "/app/examples/quantization/quantize.py" if tool == "quantize" else \
        "/app/examples/models/core/llama/convert_checkpoint.py"
    assert argv[:2] == ("python3", script)
    assert flags(argv) <= (QUANTIZE_FLAGS if tool == "quantize" else CONVERT_FLAGS)
    for flag, value in expected.items():
        assert arg(argv, flag) == value, flag
    assert (arg(argv, "--model_dir"), arg(argv, "--output_dir")) == (str(ckpt), "/w/ckpt")
    if tool == "quantize":
        assert arg(argv, "--qformat") in QFORMATS
    if precision in (Precision.FP16, Precision.BF16) and tool == "convert":
        assert "--use_weight_only" not in argv


@pytest.mark.parametrize("precision,options", [
    (Precision.FP16, {}), (Precision.BF16, {}), (Precision.INT8_WO, {}),
    (Precision.FP8, dict(calib_dataset="c")), (Precision.INT8_SQ, dict(calib_dataset="c")),
    (Precision.INT4_AWQ, dict(calib_dataset="c")),
])
def test_engine_step_per_precision(ckpt, precision, options):
    spec = trtllm_spec(ckpt, precision, **options)
    argv = engine_step(spec, PATHS).argv
    assert argv[0] == "trtllm-build" and flags(argv) <= TRTLLM_BUILD_FLAGS
    limits = EngineLimits()
    for flag, value in {"--checkpoint_dir": "/w/ckpt", "--output_dir": "/w/engine.partial",
                        "--max_batch_size": str(limits.max_batch_size), "--max_input_len": str(limits.max_input_len),
                        "--max_seq_len": str(limits.max_seq_len), "--max_num_tokens": str(limits.max_num_tokens),
                        "--kv_cache_type": "paged", "--use_paged_context_fmha": "enable", "--gemm_plugin": "auto",
                        "--remove_input_padding": "enable", "--workers": "1"}.items():
        assert arg(argv, flag) == value, flag
    assert ("--use_fp8_context_fmha" in argv) == (precision == Precision.FP8)


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
