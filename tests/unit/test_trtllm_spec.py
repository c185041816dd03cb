"""TensorRT-LLM spec rules: invalid combinations fail before any work, naming the fields."""

import json
from pathlib import Path

import pytest

from build_engines.cli_options import make_spec, resolve_gpu
from build_engines.gpus import GpuError, GpuTarget, known_gpu, parse_nvidia_smi
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineLimits, Precision, SpecError
from build_engines.trtllm.options import KvCacheDtype, SpeculativeDecoding, TrtLlmPlugins, TrtLlmServing
from tests.unit.trtllm_fixtures import info_of, llama_8b_checkpoint, trtllm_spec


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    return llama_8b_checkpoint(tmp_path_factory.mktemp("llama8b"))


@pytest.mark.parametrize("precision,options,message", [
    (Precision.FP8, dict(gpu=known_gpu("A100-80GB")),
     r"'precision' 'fp8' needs an Ada Lovelace \(SM 8.9\) or Hopper \(SM 9.0\) GPU or newer; 'gpu' A100-80GB is SM 8.0"),
    (Precision.FP16, dict(kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="d", gpu=known_gpu("A10")),
     r"'kv_cache_dtype' 'fp8' needs an Ada Lovelace"),
    (Precision.FP16, dict(gpu=known_gpu("T4")), r"'gpu' T4 is SM 7.5 \(Turing\); TensorRT-LLM 1.1.0 needs SM 8.0"),
    (Precision.INT8_SQ, {}, r"'calib_dataset' is required for precision 'int8_sq'"),
    (Precision.INT4_AWQ, {}, r"'calib_dataset' is required for precision 'int4_awq'"),
    (Precision.FP16, dict(kv_cache_dtype=KvCacheDtype.INT8), r"'calib_dataset' is required for kv_cache_dtype 'int8'"),
    (Precision.FP16, dict(tp_size=3, gpu=known_gpu("H100-SXM", 4)),
     r"'tp_size' 3 must divide them or be a multiple of them \(KV heads are duplicated\): the checkpoint has 8 KV "
     r"heads \(num_key_value_heads\)"),
    (Precision.FP16, dict(trtllm_version="1.3.0"), r"'trtllm_version' '1.3.0' has no conformance table; supported: "
                                                   r"\['1.1.0', '1.2.1'\]"),
    (Precision.FP16, dict(trtllm_version="1.2.1", triton_release="25.12"),
     r"'triton_release' '25.12' does not ship TensorRT-LLM 1.2.1; releases that do: \['26.04', '26.05', '26.06', '26.07'\]"),
    (Precision.FP16, dict(tp_size=4, pp_size=2, gpu=known_gpu("H100-SXM", 4)),
     r"'tp_size' x 'pp_size' = 8 GPUs, but 'gpu_count' is 4"),
    (Precision.FP16, dict(use_paged_context_fmha=False),
     r"'enable_kv_cache_reuse' needs 'use_paged_context_fmha'.*'enable_chunked_context' needs 'use_paged_context_fmha'"),
    (Precision.FP16, dict(paged_kv_cache=False), r"'paged_kv_cache' must be true"),
    (Precision.FP16, dict(serving=TrtLlmServing(kv_cache_free_gpu_mem_fraction=1.5)),
     r"'kv_cache_free_gpu_mem_fraction' must be in \(0, 1\], got 1.5"),
    (Precision.FP16, dict(plugins=TrtLlmPlugins(reduce_fusion=True)), r"'reduce_fusion' .* needs 'tp_size' > 1"),
    (Precision.INT4, {}, r"'precision' 'int4' is not available for backend 'tensorrt_llm'"),
])
def test_invalid_specs_fail_naming_the_fields(ckpt, precision, options, message):
    with pytest.raises(SpecError, match=message):
        trtllm_spec(ckpt, precision, **options).validate(info_of(ckpt))


def test_chunked_context_off_needs_room_for_a_whole_prompt(ckpt):
    spec = trtllm_spec(ckpt, serving=TrtLlmServing(enable_chunked_context=False))
    with pytest.raises(SpecError, match=r"'max_num_tokens' \(512\) < 'max_input_len' \(1536\) with chunked context off.*"
                                        r"chunked context is off in the spec.*fix: raise --max-num-tokens to >= 1536"):
        spec.validate(info_of(ckpt))


def test_speculative_modes_are_upstreams_and_the_wired_ones():
    from contract.upstream.trtllm_build import load_build_table

    modes = {m.value for m in SpeculativeDecoding} - {"none"}
    for version in ("1.1.0", "1.2.1"):  # every mode is a value trtllm-build accepts
        flag = load_build_table(version).flags[("trtllm-build", "--speculative_decoding_mode")]
        assert modes <= set(flag.values), version
    assert modes == {"lookahead_decoding", "eagle", "draft_tokens_external"}


@pytest.mark.parametrize("w,n,g,draft", [(4, 3, 4, 15), (1, 1, 0, 0), (7, 7, 7, 83), (1, 2, 0, 0), (2, 4, 1, 8)])
def test_lookahead_draft_length_is_upstreams_formula(w, n, g, draft):
    """calculateSpeculativeResourceTuple: (N == 1 ? 0 : N - 2) + (W - 1 + G) * (N - 1)."""
    from build_engines.trtllm.options import LookaheadConfig

    assert LookaheadConfig(w, n, g).max_draft_len == draft and LookaheadConfig(w, n, g).problems() == []


@pytest.mark.parametrize("w,n,g,message", [(0, 3, 4, "window and ngram must be >= 1"), (4, 3, -1, "verification set >= 0"),
                                           (2, 1, 0, "ngram size 1 needs window size 1"), (1, 1, 2, "ngram size 1")])
def test_illegal_lookahead_configs_are_refused_naming_the_field(ckpt, w, n, g, message):
    from build_engines.trtllm.options import LookaheadConfig

    spec = trtllm_spec(ckpt, Precision.FP16, speculative_decoding=SpeculativeDecoding.LOOKAHEAD,
                       lookahead=LookaheadConfig(w, n, g))
    with pytest.raises(SpecError, match=f"'lookahead'.*{message}"):
        spec.validate(info_of(ckpt))


def test_lookahead_plan_renders_the_build_flags_and_model_parameters(ckpt, tmp_path):
    from build_engines.trtllm.plan import BuildPaths, engine_step
    from build_engines.trtllm.repository import tensorrt_llm_config
    from build_engines.trtllm.options import LOOKAHEAD_CITATIONS, LookaheadConfig
    from contract.upstream.trtllm_build import load_build_table

    spec = trtllm_spec(ckpt, Precision.FP16, speculative_decoding=SpeculativeDecoding.LOOKAHEAD,
                       lookahead=LookaheadConfig(5, 4, 3))
    spec.validate(info_of(ckpt))
    paths = BuildPaths(tmp_path / "ckpt", tmp_path / "engine", tmp_path / "examples")
    argv = engine_step(spec, paths).argv
    assert load_build_table(spec.trtllm.trtllm_version).check_argv("trtllm-build", argv[1:]) == []
    assert argv[argv.index("--speculative_decoding_mode") + 1] == "lookahead_decoding"
    assert argv[argv.index("--max_draft_len") + 1] == str(2 + (5 - 1 + 3) * 3)
    params = {k: v.string_value for k, v in tensorrt_llm_config(tmp_path, spec).parameters.items()}
    assert {k: params[k] for k in ("decoding_mode", "lookahead_window_size", "lookahead_ngram_size",
                                   "lookahead_verification_set_size")} == \
        {"decoding_mode": "lookahead", "lookahead_window_size": "5", "lookahead_ngram_size": "4",
         "lookahead_verification_set_size": "3"}
    plain = trtllm_spec(ckpt, Precision.FP16)
    assert "--speculative_decoding_mode" not in engine_step(plain, paths).argv
    assert "decoding_mode" not in tensorrt_llm_config(tmp_path, plain).parameters
    assert all(c.source.path and c.source.repo for c in LOOKAHEAD_CITATIONS.values())


def test_lookahead_options_from_the_command_line(ckpt):
    spec = make_spec(ckpt, backend="tensorrt_llm", precision="fp16", max_batch_size=8, max_input_len=1024,
                     max_seq_len=2048, max_num_tokens=2048, default_max_tokens=64, kv_cache_size_gb=None,
                     prefix_caching=False, inference_threads=0, gpu="H100-SXM",
                     speculative_decoding="lookahead_decoding", lookahead="7,7,7")
    assert (spec.trtllm.lookahead.window_size, spec.trtllm.lookahead.max_draft_len) == (7, 83)
    assert BuildSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).trtllm.lookahead == spec.trtllm.lookahead
    with pytest.raises(SpecError, match="'lookahead' needs 'speculative_decoding'"):
        make_spec(ckpt, backend="tensorrt_llm", precision="fp16", max_batch_size=8, max_input_len=1024,
                  max_seq_len=2048, max_num_tokens=2048, default_max_tokens=64, kv_cache_size_gb=None,
                     prefix_caching=False, inference_threads=0, gpu="H100-SXM", lookahead="4,3,4")
    with pytest.raises(SpecError, match="three integers"):
        make_spec(ckpt, backend="tensorrt_llm", precision="fp16", max_batch_size=8, max_input_len=1024,
                  max_seq_len=2048, max_num_tokens=2048, default_max_tokens=64, kv_cache_size_gb=None,
                     prefix_caching=False, inference_threads=0, gpu="H100-SXM",
                  speculative_decoding="lookahead_decoding", lookahead="4,3")


@pytest.mark.parametrize("precision,gpu,options", [
    (Precision.FP8, "H100-SXM", dict(calib_dataset="cnn_dailymail", kv_cache_dtype=KvCacheDtype.FP8)),
    (Precision.FP8, "L40S", dict(calib_dataset="cnn_dailymail")),
    (Precision.INT8_SQ, "A100-80GB", dict(calib_dataset="/data/calib")),
    (Precision.INT8_WO, "A10", {}),
    (Precision.BF16, "H100-SXM", dict(tp_size=2, plugins=TrtLlmPlugins(reduce_fusion=True))),
])
def test_valid_specs_pass(ckpt, precision, gpu, options):
    trtllm_spec(ckpt, precision, gpu, **options).validate(info_of(ckpt))


def test_trtllm_spec_round_trips_through_build_json(ckpt):
    spec = trtllm_spec(ckpt, Precision.FP8, tp_size=2, kv_cache_dtype=KvCacheDtype.FP8, calib_dataset="x",
                       serving=TrtLlmServing(enable_kv_cache_reuse=False))
    data = json.loads(json.dumps(spec.to_dict()))
    assert "openvino" not in data and data["trtllm"]["gpu"]["sm"] == 90
    assert BuildSpec.from_dict(data) == spec
    assert (data["trtllm"]["trtllm_version"], data["trtllm"]["triton_release"]) == ("1.1.0", "25.12")  # build.json


def test_cpu_spec_records_no_gpu_section():
    """Engines built before the GPU path keep matching their build.json (no rebuild)."""
    assert set(BuildSpec(Path("/c")).to_dict()) == {"checkpoint", "backend", "precision", "limits", "openvino",
                                                    "fidelity"}


def test_nvidia_smi_parsing():
    out = "NVIDIA H100 80GB HBM3, 9.0, 81559\nNVIDIA H100 80GB HBM3, 9.0, 81559\n"
    assert parse_nvidia_smi(out) == GpuTarget("NVIDIA H100 80GB HBM3", 90, 79.6, 2)
    assert parse_nvidia_smi("") is None
    with pytest.raises(GpuError, match="mixes GPU kinds"):
        parse_nvidia_smi("NVIDIA L4, 8.9, 23034\nNVIDIA A10, 8.6, 23028\n")


def test_gpu_resolution_order():
    host = GpuTarget("NVIDIA L40S", 89, 44.5, 4)
    assert resolve_gpu(None, None, None, None, 2, detect=lambda: host) == host
    assert resolve_gpu("a100-80gb", None, None, None, 2, detect=lambda: host) == known_gpu("A100-80GB", 2)
    assert resolve_gpu(None, 8, 120, 96.0, 1, detect=lambda: None) == GpuTarget("SM120", 120, 96.0, 8)
    assert resolve_gpu(None, None, None, None, 2, detect=lambda: None) == known_gpu("H100-SXM", 2)
    with pytest.raises(GpuError, match="not a known GPU"):
        resolve_gpu("K80", None, None, None, 1)
    with pytest.raises(GpuError, match="give both --gpu-sm and --gpu-memory-gib"):
        resolve_gpu(None, None, 90, None, 1)


def test_cli_options_pick_the_version(ckpt):
    args = dict(backend="tensorrt_llm", precision="fp16", max_batch_size=32, max_input_len=1536, max_seq_len=2048,
                max_num_tokens=512, default_max_tokens=256, prefix_caching=False)
    assert make_spec(ckpt, **args, detect=lambda: None).trtllm.trtllm_version == "1.1.0"  # .env's TRITON_IMAGE
    by_image = make_spec(ckpt, **args, triton_image="26.07", detect=lambda: None).trtllm
    assert (by_image.trtllm_version, by_image.triton_release) == ("1.2.1", "26.07")
    by_version = make_spec(ckpt, **args, trtllm_version="1.2.1", detect=lambda: None).trtllm
    assert (by_version.trtllm_version, by_version.triton_release) == ("1.2.1", "26.07")  # its newest image
    with pytest.raises(SpecError, match="Triton 26.07 ships TensorRT-LLM 1.2.1, not 1.1.0"):
        make_spec(ckpt, **args, triton_image="26.07", trtllm_version="1.1.0", detect=lambda: None)


def test_cli_options_make_one_spec(ckpt):
    spec = make_spec(ckpt, backend="tensorrt_llm", precision="fp8", max_batch_size=64, max_input_len=1024,
                     max_seq_len=4096, max_num_tokens=1024, default_max_tokens=256, tp_size=2,
                     kv_cache_dtype="fp8", gpu="H200", calib_dataset="cnn_dailymail", kv_cache_fraction=0.8,
                     scheduler_policy="max_utilization", detect=lambda: None)
    assert (spec.trtllm.tp_size, spec.trtllm.gpu.name, spec.trtllm.gpu.count) == (2, "H200", 2)
    assert spec.trtllm.serving.kv_cache_free_gpu_mem_fraction == 0.8
    assert spec.limits == EngineLimits(64, 1024, 4096, 1024, 256)
    spec.validate(info_of(ckpt))


def test_build_refuses_a_host_that_cannot_run_the_engine(ckpt):
    from build_engines.process import BuildError
    from build_engines.trtllm.build import check_host

    spec = trtllm_spec(ckpt, Precision.FP16, "H100-SXM", tp_size=2)
    with pytest.raises(BuildError, match="no NVIDIA GPU is visible"):
        check_host(spec, None)
    with pytest.raises(BuildError, match=r"targets 2 x H100-SXM \(SM 9.0.*this host has 2 x NVIDIA L40S \(SM 8.9"):
        check_host(spec, GpuTarget("NVIDIA L40S", 89, 44.5, 2))
    with pytest.raises(BuildError, match="tp_size x pp_size = 2 GPUs, this host has 1"):
        check_host(spec, GpuTarget("NVIDIA H100 80GB HBM3", 90, 79.6, 1))
    check_host(spec, GpuTarget("NVIDIA H100 80GB HBM3", 90, 79.6, 8))


def test_build_refuses_an_image_with_another_tensorrt_llm(ckpt):
    from build_engines.process import BuildError
    from build_engines.trtllm.build import check_versions

    spec = trtllm_spec(ckpt, version="1.2.1")
    check_versions(spec, {"tensorrt_llm": "1.2.1"})
    with pytest.raises(BuildError, match=r"targets TensorRT-LLM 1.2.1 \(Triton 26.07\) but this image has 1.1.0"):
        check_versions(spec, {"tensorrt_llm": "1.1.0"})


def test_engines_of_two_versions_live_side_by_side(ckpt):
    from build_engines.cli import default_engine_dir

    old, new = (default_engine_dir(trtllm_spec(ckpt, version=v)) for v in ("1.1.0", "1.2.1"))
    assert old != new and old.name.endswith("-tp1-pp1-trtllm1.1.0") and new.name.endswith("-trtllm1.2.1")
