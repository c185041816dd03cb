import json
from pathlib import Path

import pytest

from build_engines.checkpoint import CheckpointError, checkpoint_hash, inspect_checkpoint
from build_engines.openvino.build import export_command
from build_engines.spec import BuildSpec
from build_engines.spec_base import EngineBackend, EngineLimits, Precision, SpecError
from build_engines.openvino.options import OpenVinoOptions


def test_default_checkpoint_facts(default_checkpoint):
    info = inspect_checkpoint(default_checkpoint)
    assert (info.architecture, info.num_layers, info.hidden_size, info.num_heads, info.num_kv_heads, info.vocab_size) == \
        ("LlamaForCausalLM", 30, 576, 9, 3, 49152)
    assert 130e6 < info.num_parameters < 140e6  # SmolLM2-135M
    assert info.kv_cache_bytes_per_token(2) == 2 * 30 * 3 * 64 * 2


def test_non_llama_is_rejected(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(CheckpointError, match="'GPT2LMHeadModel' is not a Llama-family model"):
        inspect_checkpoint(tmp_path)


def test_missing_config(tmp_path):
    with pytest.raises(CheckpointError, match="config.json is missing"):
        inspect_checkpoint(tmp_path)


def test_hash_changes_with_content(tmp_path):
    (tmp_path / "a").write_text("1")
    h1 = checkpoint_hash(tmp_path)
    (tmp_path / "a").write_text("2")
    assert checkpoint_hash(tmp_path) != h1


@pytest.mark.parametrize("spec,message", [
    (BuildSpec(Path("x"), precision=Precision.FP8), "'precision' 'fp8' is not available for backend 'openvino'"),
    (BuildSpec(Path("x"), backend=EngineBackend.TENSORRT_LLM, precision=Precision.INT4), "allowed: \\['fp16'"),
    (BuildSpec(Path("x"), limits=EngineLimits(max_input_len=4096, max_seq_len=2048)), "'max_input_len' \\(4096\\) must be < 'max_seq_len'"),
    (BuildSpec(Path("x"), limits=EngineLimits(max_batch_size=0)), "'max_batch_size' must be >= 1"),
    (BuildSpec(Path("x"), openvino=OpenVinoOptions(kv_cache_size_gb=-1)), "'kv_cache_size_gb' must be >= 0"),
])
def test_invalid_specs_name_the_fields(spec, message):
    with pytest.raises(SpecError, match=message):
        spec.validate()


def test_max_seq_len_is_checked_against_the_checkpoint(default_checkpoint):
    info = inspect_checkpoint(default_checkpoint)
    with pytest.raises(SpecError, match="exceeds the checkpoint's max_position_embeddings \\(8192\\)"):
        BuildSpec(default_checkpoint, limits=EngineLimits(max_seq_len=9000, max_input_len=100)).validate(info)


def test_spec_round_trips_through_json():
    spec = BuildSpec(Path("/ckpt"), precision=Precision.INT4, limits=EngineLimits(max_batch_size=4),
                     openvino=OpenVinoOptions(kv_cache_size_gb=3, enable_prefix_caching=True))
    assert BuildSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_kv_cache_sizing(default_checkpoint):
    info = inspect_checkpoint(default_checkpoint)
    # The default f32 cache: 32 x 2048 tokens x 2 x 30 layers x 3 heads x 256 bytes = 3.02 GB at
    # most; u8, 64 bytes + an f32 scale and zero point per head and token: 0.85 GB (f16: 1.51 GB).
    spec = BuildSpec(default_checkpoint)
    assert spec.kv_cache_bound_gb(info) == pytest.approx(3.02, abs=0.01)
    u8 = BuildSpec(default_checkpoint, openvino=OpenVinoOptions(kv_cache_precision="u8"))
    assert u8.kv_cache_bound_gb(info) == pytest.approx(0.85, abs=0.01)
    f16 = BuildSpec(default_checkpoint, openvino=OpenVinoOptions(kv_cache_precision="f16"))
    assert f16.kv_cache_bound_gb(info) == pytest.approx(1.51, abs=0.01)
    assert spec.openvino.kv_cache_size_gb == 0  # grows on demand


@pytest.mark.parametrize("precision,expected", [(Precision.INT8, ["--weight-format", "int8"]),
                                                (Precision.FP16, ["--weight-format", "fp16"]),
                                                (Precision.INT4, ["--weight-format", "fp32"])])
def test_export_command(default_checkpoint, precision, expected):
    info = inspect_checkpoint(default_checkpoint)  # int4: exported float, then compressed by NNCF with data
    cmd = export_command(BuildSpec(default_checkpoint, precision=precision), info, Path("/out"))
    joined = " ".join(cmd)
    assert " ".join(expected) in joined and "--task text-generation-with-past" in joined and cmd[-1] == "/out"


def test_serving_settings_do_not_need_a_rebuild():
    a = BuildSpec(Path("/c"), limits=EngineLimits(max_batch_size=8), openvino=OpenVinoOptions(max_queue_size=1))
    b = BuildSpec(Path("/c"), limits=EngineLimits(max_batch_size=32))
    assert a.artifact_fields() == b.artifact_fields()
    assert a.artifact_fields() != BuildSpec(Path("/c"), precision=Precision.INT4).artifact_fields()
