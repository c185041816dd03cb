"""EAGLE on the TensorRT-LLM engine flow (build_engines/trtllm/eagle.py): the heads converted
with the base model by examples/eagle/convert_checkpoint.py and the engine built with
--speculative_decoding_mode eagle, each command accepted by the version's table (tool
convert_eagle, trtllm-build); the tensorrt_llm model's decoding_mode / eagle_choices; and every
upstream limit (rows eagle_*) refused naming its field."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from build_engines.cli_options import make_spec
from build_engines.spec import BuildSpec
from build_engines.spec_base import Precision, SpecError
from build_engines.trtllm.options import EagleOptions
from build_engines.trtllm.eagle import choices_parameter
from build_engines.trtllm.plan import BuildPaths, checked, checkpoint_step, engine_step
from build_engines.trtllm.repository import tensorrt_llm_config
from build_engines.trtllm.options import KvCacheDtype, SpeculativeDecoding
from contract.upstream.trtllm_build import supported_versions
from tests.unit.trtllm_fixtures import LLAMA_8B, info_of, llama_8b_checkpoint, trtllm_spec

TREE = ((0,), (0, 0), (1,), (0, 0, 0), (0, 0, 0, 0))  # 4 deep


@pytest.fixture
def ckpt(tmp_path) -> Path:
    return llama_8b_checkpoint(tmp_path / "llama8b")


@pytest.fixture
def heads(tmp_path) -> Path:
    """An EAGLE-1 heads checkpoint as the converter reads it: a Llama config.json and weights."""
    return llama_8b_checkpoint(tmp_path / "eagle-heads", {**LLAMA_8B, "num_hidden_layers": 1})


def eagle_spec(ckpt: Path, heads: Path, version: str | None = None, precision=Precision.FP16, **changes) -> BuildSpec:
    eagle = EagleOptions(str(heads), **{k: v for k, v in changes.items() if k in EagleOptions.__dataclass_fields__})
    rest = {k: v for k, v in changes.items() if k not in EagleOptions.__dataclass_fields__}
    return trtllm_spec(ckpt, precision, version=version, speculative_decoding=SpeculativeDecoding.EAGLE, eagle=eagle,
                       **rest)


@pytest.mark.parametrize("version", supported_versions())
def test_the_plan_converts_the_heads_and_builds_an_eagle_engine(ckpt, heads, tmp_path, version):
    spec = eagle_spec(ckpt, heads, version, choices=TREE)
    spec.validate(info_of(ckpt))
    paths = BuildPaths(tmp_path / "tllm", tmp_path / "engine", Path("/examples"))
    convert = checked(spec, checkpoint_step(spec, info_of(ckpt), paths)).argv  # the version's converter accepts it
    assert convert[:2] == ("python3", "/examples/eagle/convert_checkpoint.py")
    flags = dict(zip(convert[2::2], convert[3::2]))
    assert flags == {"--model_dir": str(ckpt), "--eagle_model_dir": str(heads), "--output_dir": str(tmp_path / "tllm"),
                     "--dtype": "float16", "--tp_size": "1", "--pp_size": "1", "--max_draft_len": "63",
                     "--num_eagle_layers": "4", "--max_non_leaves_per_layer": "10", "--workers": "1"}
    build = checked(spec, engine_step(spec, paths)).argv
    assert build[build.index("--speculative_decoding_mode") + 1] == "eagle"
    assert build[build.index("--max_draft_len") + 1] == "63"
    assert build[build.index("--use_paged_context_fmha") + 1] == "enable"
    params = {k: v.string_value for k, v in tensorrt_llm_config(tmp_path, spec).parameters.items()}
    assert params["decoding_mode"] == "eagle"
    assert params["eagle_choices"] == "{0}, {0, 0}, {1}, {0, 0, 0}, {0, 0, 0, 0}"  # braces: csvStrToVecVecInt
    default_tree = eagle_spec(ckpt, heads, version)
    assert "eagle_choices" not in tensorrt_llm_config(tmp_path, default_tree).parameters  # the backend's mc_sim_7b_63


@pytest.mark.parametrize("changes, message", [
    ({"precision": Precision.FP8, "calib_dataset": "cnn_dailymail"}, r"'precision' 'fp8': EAGLE engines are float16 or bfloat16"),
    ({"kv_cache_dtype": KvCacheDtype.INT8, "calib_dataset": "x"}, r"'kv_cache_dtype' 'int8'"),
    ({"pp_size": 2, "gpu_name": "H100-SXM"}, r"'pp_size' 2: EAGLE does not support pipeline parallelism"),
    ({"max_draft_len": 300}, r"'max_draft_len' 300 must be in \[1, 256\]"),
    ({"choices": ((0,), (0, 0))}, r"'eagle_choices' are 2 deep; they must be exactly 'num_eagle_layers' 4 deep"),
    ({"choices": tuple((i,) for i in range(3)) + tuple((i, 0) for i in range(3)) + ((0, 0, 0), (0, 0, 0, 0)),
      "max_non_leaves_per_layer": 2}, r"3 non-leaf nodes at depth 1; at most 'max_non_leaves_per_layer' 2"),
])
def test_upstream_limits_are_refused_naming_the_field(ckpt, heads, changes, message):
    changes = dict(changes)
    precision = changes.pop("precision", Precision.FP16)
    if "gpu_name" in changes:
        changes["gpu_name"] = "H100-SXM"
        spec = eagle_spec(ckpt, heads, precision=precision, **changes)
        spec = dataclasses.replace(spec, trtllm=dataclasses.replace(spec.trtllm, gpu=dataclasses.replace(
            spec.trtllm.gpu, count=2)))
    else:
        spec = eagle_spec(ckpt, heads, precision=precision, **changes)
    with pytest.raises(SpecError, match=message):
        spec.validate(info_of(ckpt))


def test_the_heads_must_be_a_checkpoint_and_the_batch_fit_the_builder(ckpt, tmp_path):
    from build_engines.spec_base import EngineLimits

    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match=r"'eagle_model_dir' .*empty must be a Hugging Face checkpoint"):
        eagle_spec(ckpt, tmp_path / "empty").validate(info_of(ckpt))
    big = dataclasses.replace(eagle_spec(ckpt, llama_8b_checkpoint(tmp_path / "h")),
                              limits=EngineLimits(max_batch_size=600))
    with pytest.raises(SpecError, match=r"'max_batch_size' 600: EAGLE engines take at most 512"):
        big.validate(info_of(ckpt))


def test_eagle_options_from_the_command_line_and_build_json(ckpt, heads):
    common = dict(backend="tensorrt_llm", precision="bf16", max_batch_size=8, max_input_len=1024, max_seq_len=2048,
                  max_num_tokens=2048, default_max_tokens=64, kv_cache_size_gb=None, prefix_caching=False,
                  inference_threads=0, gpu="H100-SXM")
    spec = make_spec(ckpt, **common, speculative_decoding="eagle", eagle_model_dir=heads, eagle_tree="31,3,5",
                     eagle_choices="[[0], [0, 0], [0, 0, 0]]")
    assert spec.trtllm.eagle == EagleOptions(str(heads.resolve()), 31, 3, 5, ((0,), (0, 0), (0, 0, 0)))
    assert BuildSpec.from_dict(json.loads(json.dumps(spec.to_dict()))).trtllm.eagle == spec.trtllm.eagle
    with pytest.raises(SpecError, match="need 'speculative_decoding' eagle"):
        make_spec(ckpt, **common, eagle_model_dir=heads)
    with pytest.raises(SpecError, match="'eagle_choices' must be a JSON list of lists of integers"):
        make_spec(ckpt, **common, speculative_decoding="eagle", eagle_model_dir=heads, eagle_choices="[0, 1")
    with pytest.raises(SpecError, match="'eagle_tree' must be three integers"):
        make_spec(ckpt, **common, speculative_decoding="eagle", eagle_model_dir=heads, eagle_tree="63,4")
    with pytest.raises(SpecError, match="configure --backend tensorrt_llm"):
        make_spec(ckpt, **{**common, "backend": "openvino", "precision": None, "gpu": None}, eagle_model_dir=heads)


def test_the_choices_parameter_is_the_braces_format():
    assert choices_parameter(((0,), (0, 1), (2, 0, 0))) == "{0}, {0, 1}, {2, 0, 0}"


def test_the_builder_turns_paged_context_fmha_on_for_eagle(ckpt, heads, tmp_path):
    """Row eagle_builder_limits (builder.py 1302-1305): asked off, it is on in the engine, and the
    plan says which rule did it."""
    from build_engines.trtllm.options import TrtLlmServing
    from build_engines.trtllm.spec import effective

    spec = eagle_spec(ckpt, heads, use_paged_context_fmha=False,
                      serving=TrtLlmServing(enable_kv_cache_reuse=False, enable_chunked_context=False))
    eff = effective(spec.precision.value, spec.trtllm, spec.limits)
    assert eff.use_paged_context_fmha and [o.rule.id for o in eff.overrides] == ["eagle_builder_limits"]
    argv = engine_step(spec, BuildPaths(tmp_path / "c", tmp_path / "e", tmp_path / "x")).argv
    assert argv[argv.index("--use_paged_context_fmha") + 1] == "enable"


def test_the_plan_says_what_the_builder_adds_for_the_draft_tokens(ckpt, heads, tmp_path):
    from build_engines.spec_base import EngineLimits

    spec = dataclasses.replace(eagle_spec(ckpt, heads), limits=EngineLimits(max_batch_size=64, max_input_len=1536,
                                                                               max_seq_len=2048, max_num_tokens=2048))
    step = engine_step(spec, BuildPaths(tmp_path / "c", tmp_path / "e", tmp_path / "x"))
    assert "max_seq_len 2115 and max_num_tokens 4096" in step.title  # 2048 + 63 + 4; 64 * (63 + 1)
