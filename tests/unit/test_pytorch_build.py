"""`build_engines plan/build --backend tensorrt_llm_pytorch`: the spec's rules, the ModelOpt
command checked against its table, pre-quantized checkpoints, the build without a compile, and
the repository around tensorrt_llm_pytorch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from build_engines.checkpoint_quant import read_quantization
from build_engines.cli_options import make_spec
from build_engines.pytorch.build import build_pytorch_engine, engine_is_built
from build_engines.pytorch.plan import pytorch_plan_lines, pytorch_steps, quantize_step, examples_dir
from build_engines.pytorch.repository import MODEL_SUBDIR
from build_engines.render import read_config
from build_engines.repository import render_repository
from build_engines.spec import BuildSpec
from build_engines.spec_base import SpecError
from contract import names
from contract.model_configs import KvCacheDtype, PyTorchEngineParameters
from contract.model_parameters import from_parameters
from contract.upstream.modelopt import modelopt_for_trtllm
from tests.unit.trtllm_fixtures import LLAMA_8B, info_of, llama_8b_checkpoint

DEFAULTS = dict(max_batch_size=32, max_input_len=1536, max_seq_len=2048, max_num_tokens=512, default_max_tokens=256,
                kv_cache_size_gb=0, prefix_caching=True, inference_threads=0)


def spec_for(checkpoint: Path, image="26.07", precision=None, **options) -> BuildSpec:
    options.setdefault("gpu", "H100-SXM")
    return make_spec(checkpoint, backend="tensorrt_llm_pytorch", precision=precision, triton_image=image, detect=lambda: None,
                     **(DEFAULTS | options))


def validated(checkpoint: Path, **kwargs) -> BuildSpec:
    spec = spec_for(checkpoint, **kwargs)
    spec.validate(info_of(checkpoint))
    return spec


def quantized_checkpoint(directory: Path, quant_algo="FP8", kv="FP8", producer="modelopt") -> Path:
    llama_8b_checkpoint(directory)
    (directory / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": producer, "version": "0.37.0"},
         "quantization": {"quant_algo": quant_algo, "kv_cache_quant_algo": kv}}))
    return directory


@pytest.fixture
def llama(tmp_path) -> Path:
    return llama_8b_checkpoint(tmp_path / "llama")


# --- versions ---------------------------------------------------------------------------------
def test_the_25_12_image_is_refused_naming_both_versions(llama):
    with pytest.raises(SpecError) as e:
        validated(llama, image="25.12")
    assert "TensorRT-LLM 1.2.1" in str(e.value) and "Triton 25.12 ships TensorRT-LLM 1.1.0" in str(e.value)
    assert "26.07" in str(e.value)


@pytest.mark.parametrize("image", ["26.04", "26.05", "26.06", "26.07"])
def test_every_1_2_1_image_plans(llama, image):
    assert validated(llama, image=image).pytorch.trtllm_version == "1.2.1"


def test_engine_only_options_are_refused_by_name(llama):
    with pytest.raises(SpecError, match=r"\['--scheduler-policy', '--max-queue-delay-us'\].*compiles none"):
        spec_for(llama, scheduler_policy="max_utilization", max_queue_delay_us=10)
    # --guided-decoding configures the LLM's decoder too (LLM(guided_decoding_backend=...))
    assert spec_for(llama, guided_decoding="none").pytorch.serving.guided_decoding_backend.value == "none"


# --- quantizing with ModelOpt -------------------------------------------------------------------
def test_fp8_with_an_fp8_kv_cache_is_hf_ptq_with_both(llama, tmp_path):
    spec = validated(llama, precision="fp8", kv_cache_dtype="fp8", calib_dataset="cnn_dailymail")
    step = quantize_step(spec, modelopt_for_trtllm("1.2.1"), tmp_path / "out", examples_dir({}))
    argv = list(step.argv)
    assert argv[1] == "/opt/modelopt/examples/llm_ptq/hf_ptq.py"
    assert argv[argv.index("--qformat") + 1] == "fp8" and argv[argv.index("--kv_cache_qformat") + 1] == "fp8"
    assert argv[argv.index("--dataset") + 1] == "cnn_dailymail" and argv[argv.index("--export_path") + 1].endswith("out")


def test_a_local_calibration_directory_is_loaded_by_its_name_from_its_parent(llama, tmp_path):
    """No hub: hf_ptq.py --dataset cnn_dailymail run in the directory that holds the kit's local copy
    (ModelOpt table rule dataset_local_directory; build_engines/calibration_data.py)."""
    from build_engines.calibration_data import write_calibration_dataset

    local = write_calibration_dataset(tmp_path / "calib", rows=8).directory
    spec = validated(llama, precision="fp8", kv_cache_dtype="fp8", calib_dataset=str(local))
    step = quantize_step(spec, modelopt_for_trtllm("1.2.1"), tmp_path / "out", examples_dir({}))
    argv = list(step.argv)
    assert argv[argv.index("--dataset") + 1] == "cnn_dailymail"
    assert step.cwd == str(local.parent) and step.command_line().startswith(f"cd {local.parent} && python3 ")


def test_a_16_bit_kv_cache_is_said_explicitly(llama, tmp_path):
    """hf_ptq.py's --kv_cache_qformat defaults to fp8 (ModelOpt table rule kv_default_fp8)."""
    spec = validated(llama, precision="fp8", calib_dataset="pile")
    argv = list(quantize_step(spec, modelopt_for_trtllm("1.2.1"), tmp_path, Path("/x")).argv)
    assert argv[argv.index("--kv_cache_qformat") + 1] == "none"


def test_int4_awq_passes_its_block_size(llama, tmp_path):
    spec = validated(llama, precision="int4_awq", calib_dataset="cnn_dailymail")
    argv = list(quantize_step(spec, modelopt_for_trtllm("1.2.1"), tmp_path, Path("/x")).argv)
    assert argv[argv.index("--awq_block_size") + 1] == "128"


@pytest.mark.parametrize("options,message", [
    (dict(precision="fp8"), "'calib_dataset' is required"),
    (dict(precision="fp8", calib_dataset="/data/calib"), "or a local directory named 'cnn_dailymail'"),
    (dict(precision="nvfp4", calib_dataset="cnn_dailymail"), "NVFP4 weights need a Blackwell GPU"),
    (dict(precision="fp8", calib_dataset="cnn_dailymail", gpu="A100-80GB"), "needs an Ada Lovelace"),
    (dict(kv_cache_dtype="fp8"), "'kv_cache_dtype' fp8 needs quantized weights"),
    (dict(kv_cache_dtype="int8"), "'kv_cache_dtype' int8"),
    (dict(precision="int8_sq"), "is not available for backend 'tensorrt_llm_pytorch'"),
    (dict(tp_size=3, gpu_count=4), "'tp_size' 3 must divide"),
    (dict(tp_size=2, gpu_count=1), "'gpu_count' is 1"),
])
def test_what_the_flow_cannot_do_is_refused_naming_the_fields(llama, options, message):
    with pytest.raises(SpecError, match=message):
        validated(llama, **options)


def test_nvfp4_plans_on_blackwell(llama):
    assert validated(llama, precision="nvfp4", calib_dataset="cnn_dailymail", gpu="B200").precision.value == "nvfp4"


# --- pre-quantized checkpoints ------------------------------------------------------------------
def test_a_modelopt_checkpoint_is_served_as_it_is(tmp_path):
    checkpoint = quantized_checkpoint(tmp_path / "fp8")
    spec = validated(checkpoint)  # precision auto
    steps = pytorch_steps(spec, info_of(checkpoint), read_quantization(checkpoint), tmp_path / "staging")
    assert [s.argv for s in steps] == [()] * 4 and "copy the checkpoint as it is" in steps[1].title
    assert validated(checkpoint, precision="fp8", kv_cache_dtype="fp8").precision.value == "fp8"


def test_config_json_quantization_config_is_read_too(tmp_path):
    checkpoint = llama_8b_checkpoint(tmp_path / "c", LLAMA_8B | {"quantization_config": {
        "quant_method": "modelopt", "quant_algo": "W4A16_AWQ", "kv_cache_scheme": {"num_bits": 8, "type": "float"}}})
    quant = read_quantization(checkpoint)
    assert (quant.method, quant.quant_algo, quant.kv_cache_quant_algo) == ("modelopt", "W4A16_AWQ", "FP8")
    with pytest.raises(SpecError, match="already quantized by ModelOpt.*= int4_awq"):
        validated(checkpoint, precision="fp8", calib_dataset="cnn_dailymail")


@pytest.mark.parametrize("make,message", [
    (lambda d: quantized_checkpoint(d, kv=None), "has no FP8 KV cache"),
    (lambda d: llama_8b_checkpoint(d, LLAMA_8B | {"quantization_config": {"quant_method": "gptq", "bits": 4}}),
     "quantized by 'gptq'"),
    (lambda d: quantized_checkpoint(d, quant_algo="NVFP4", kv=None), "NVFP4 weights need a Blackwell GPU"),
])
def test_pre_quantized_checkpoints_are_checked(tmp_path, make, message):
    checkpoint = make(tmp_path / "q")
    with pytest.raises(SpecError, match=message):
        validated(checkpoint, kv_cache_dtype="fp8" if "KV" in message else "auto")


# --- plan -----------------------------------------------------------------------------------------
def test_plan_says_what_runs_where(llama, tmp_path):
    spec = validated(llama, precision="fp8", kv_cache_dtype="fp8", calib_dataset="cnn_dailymail", tp_size=2,
                     gpu_count=2)
    text = "\n".join(pytorch_plan_lines(spec, info_of(llama), tmp_path / "engine"))
    assert "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 (TensorRT-LLM 1.2.1" in text
    assert "hf_ptq.py --pyt_ckpt_path" in text and "no engine is compiled" in text
    assert "tensor_parallel_size=2" in text and "KvCacheConfig(free_gpu_memory_fraction=0.9, enable_block_reuse=True, " \
                                               "dtype='fp8')" in text
    assert "starts its 2 GPU worker(s) itself through mpi4py" in text and "KV cache:" in text


# --- build (no compile: a copy) and the repository ----------------------------------------------------
def test_build_copies_the_checkpoint_and_records_the_target_version(default_checkpoint, tmp_path):
    spec = validated(default_checkpoint, kv_cache_reuse=False)
    engine = tmp_path / "engine"
    record = build_pytorch_engine(spec, engine)
    assert engine_is_built(engine) and record.versions["tensorrt_llm"] == "1.2.1"
    assert {p.name for p in (engine / MODEL_SUBDIR).iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert not (engine / MODEL_SUBDIR / ".prepared.json").exists()
    assert BuildSpec.from_dict(record.spec) == spec

    out = tmp_path / "repository"
    models = render_repository(engine, out)
    assert set(models) == {names.PREPROCESSING, names.POSTPROCESSING, names.PYTORCH_ENGINE, names.LLM_BLS, names.ENSEMBLE}
    config = read_config(out / names.PYTORCH_ENGINE / "config.pbtxt")
    params = from_parameters(PyTorchEngineParameters, names.PYTORCH_ENGINE,
                             {k: v.string_value for k, v in config.parameters.items()})
    assert params.model_dir == engine / MODEL_SUBDIR and params.dtype == "bfloat16"  # float32 checkpoint
    assert (params.enable_block_reuse, params.kv_cache_dtype) == (False, KvCacheDtype.AUTO)
    ensemble = read_config(out / names.ENSEMBLE / "config.pbtxt")
    assert ensemble.ensemble_scheduling.step[1].model_name == names.PYTORCH_ENGINE
    pre = read_config(out / names.PREPROCESSING / "config.pbtxt")
    assert pre.parameters["tokenizer_dir"].string_value == str(engine / MODEL_SUBDIR)
    # no bad words, penalties or seeds: TorchSampler at 1.2.1 accepts and ignores them (sampling_support_1.2.1.json)
    assert pre.parameters["engine_features"].string_value == "GUIDED_DECODING,MULTIPLE_SEQUENCES,TOP_LOG_PROBS"
    assert "1.2.1" in pre.parameters["engine_label"].string_value

    unary = render_repository(engine, tmp_path / "unary", decoupled=False)
    assert names.ENGINE_RELAY in unary
    relay = read_config(tmp_path / "unary" / names.ENGINE_RELAY / "config.pbtxt")
    assert relay.parameters["target_model"].string_value == names.PYTORCH_ENGINE


# --- the ModelOpt table ---------------------------------------------------------------------------
def test_the_modelopt_table_of_1_2_1_checks_hf_ptq_flags():
    table = modelopt_for_trtllm("1.2.1")
    assert table.version == "0.37.0" and table.requirement == "nvidia-modelopt[torch]~=0.37.0"
    assert {p: f.quant_algo for p, f in table.formats.items()} == {"fp8": "FP8", "int4_awq": "W4A16_AWQ",
                                                                   "nvfp4": "NVFP4"}
    assert table.check_argv(["--qformat", "fp8", "--kv_cache_qformat", "none", "--calib_size", "512"]) == []
    assert table.check_argv(["--qformat", "int3"]) == [
        f"hf_ptq --qformat accepts {list(table.flags['--qformat'].values)}, got 'int3'"]
    assert table.check_argv(["--calib_dataset", "x"]) == ["hf_ptq.py --calib_dataset is not a flag of ModelOpt 0.37.0"]
    assert table.flags["--kv_cache_qformat"].default == "fp8"  # why the plan always says it


def test_modelopt_rows_are_cited_at_the_tag_except_the_pin():
    table = modelopt_for_trtllm("1.2.1").table
    for row in table.rows:
        cite = table.citation(row)
        assert cite.confirmed == (row["kind"] != "pin") and cite.lines, row
