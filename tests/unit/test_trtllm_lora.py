"""LoRA on the TensorRT-LLM engine flow: the adapters' modules and ranks become trtllm-build's
LoRA flags (accepted by each version's conformance table), each adapter one hf_lora_convert.py
run into the prefetch directory named by its task id, the tensorrt_llm model the cache
parameters, preprocessing the served adapters; the relays never send task 0 (the base model)."""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path

import numpy as np
import pytest

from build_engines.render import read_config
from build_engines.repository import render_repository
from build_engines.spec import BuildSpec
from build_engines.trtllm.lora import HF_TO_TRTLLM, TrtLlmLora, lora_options
from build_engines.spec_base import Precision
from build_engines.trtllm.plan import BuildPaths, checked, engine_step, lora_steps, plan_steps
from contract import lora, names
from contract.build_record import BuildRecord
from contract.features import Feature
from contract.model_configs import PreprocessingParameters
from contract.model_parameters import from_parameters
from contract.params import InvalidParameter
from contract.upstream.trtllm_build import supported_versions
from model_repository.engines.relay.bls_pipeline import without_base_adapter
from model_repository.text.generate_request import GenerateRequest
from model_repository.text.preprocessor import Preprocessor
from standins.trtllm import upstream
from standins.trtllm.settings import load_settings
from standins.trtllm.upstream import StandinLimitation
from tests.unit.trtllm_fixtures import info_of, llama_8b_checkpoint, trtllm_spec, write_default_tokenizer

PATHS = BuildPaths(Path("/ckpt"), Path("/engine"), Path("/examples"))


def _adapter(root: Path, name: str, r: int, modules: list[str]) -> None:
    (root / name).mkdir(parents=True)
    (root / name / lora.ADAPTER_CONFIG).write_text(json.dumps({"peft_type": "LORA", "r": r, "lora_alpha": 2 * r,
                                                              "target_modules": modules}))
    (root / name / lora.ADAPTER_WEIGHTS).write_bytes(b"")


@pytest.fixture
def adapters(tmp_path) -> Path:
    root = tmp_path / "adapters"
    _adapter(root, "sql", 8, ["q_proj", "v_proj"])
    _adapter(root, "chat", 16, ["q_proj", "k_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    return root


def test_the_adapters_become_the_engines_lora_modules_and_rank(adapters):
    options = lora_options(adapters)
    assert options.adapters == ("chat", "sql")  # task ids 1, 2: name order (contract/lora.py)
    assert options.target_modules == ("attn_dense", "attn_k", "attn_q", "attn_v", "mlp_4h_to_h", "mlp_gate",
                                      "mlp_h_to_4h")
    assert options.max_rank == 16 and TrtLlmLora.from_dict(dataclasses.asdict(options)) == options


def test_a_module_the_converter_does_not_map_is_refused_naming_it(tmp_path):
    _adapter(tmp_path, "head", 8, ["q_proj", "lm_head"])
    with pytest.raises(lora.LoraError, match=r"adapter head targets \['lm_head'\]"):
        lora_options(tmp_path)


@pytest.mark.parametrize("version", supported_versions())
def test_build_flags_and_conversions(adapters, tmp_path, version):
    spec = trtllm_spec(llama_8b_checkpoint(tmp_path / "llama8b"), version=version)
    spec = dataclasses.replace(spec, trtllm=dataclasses.replace(spec.trtllm, lora=lora_options(adapters)))
    argv = checked(spec, engine_step(spec, PATHS)).argv  # the version's trtllm-build accepts them
    at = argv.index("--lora_target_modules")
    assert argv[argv.index("--lora_plugin") + 1] == "auto" and argv[argv.index("--max_lora_rank") + 1] == "16"
    assert argv[at + 1:at + 8] == spec.trtllm.lora.target_modules
    steps = lora_steps(spec, PATHS, "float16")
    assert [s.argv for s in steps] == [
        ("python3", "/examples/hf_lora_convert.py", "-i", str(adapters.resolve() / name), "-o", f"/engine/lora/{i}",
         "--storage-type", "float16") for i, name in ((1, "chat"), (2, "sql"))]
    # a bfloat16 engine could not prefetch them (row lora.prefetch_dtypes): refused while planning
    bf16 = dataclasses.replace(spec, precision=Precision.BF16)
    with pytest.raises(lora.LoraError, match=r"'lora_dir': TensorRT-LLM .* bfloat16 here, .*build with --precision fp16"):
        plan_steps(bf16, info_of(bf16.checkpoint), PATHS)
    plain = trtllm_spec(llama_8b_checkpoint(tmp_path / "llama8b"), version=version)
    assert "--lora_plugin" not in engine_step(plain, PATHS).argv and lora_steps(plain, PATHS, "float16") == []


def _engine(root: Path, spec: BuildSpec) -> Path:
    engine = root / "engine"
    engine.mkdir()
    BuildRecord(backend="tensorrt_llm", spec=spec.to_dict(), checkpoint={}, versions={},
                built_at=datetime.datetime.now().isoformat(), build_seconds=1.0).write(engine)
    write_default_tokenizer(engine / "tokenizer")
    return engine


def test_the_repository_prefetches_the_adapters_and_preprocessing_knows_them(adapters, tmp_path, default_checkpoint):
    spec = trtllm_spec(llama_8b_checkpoint(tmp_path / "llama8b"))
    spec = dataclasses.replace(spec, trtllm=dataclasses.replace(spec.trtllm, lora=lora_options(adapters)))
    engine = _engine(tmp_path, spec)
    render_repository(engine, tmp_path / "repository", lora_dir=adapters)
    params = {k: v.string_value for k, v in read_config(tmp_path / "repository" / names.TRTLLM_ENGINE /
                                                        "config.pbtxt").parameters.items()}
    assert params["lora_prefetch_dir"] == str(engine.resolve() / "lora")
    assert (params["lora_cache_optimal_adapter_size"], params["lora_cache_max_adapter_size"]) == ("16", "64")
    pre_config = read_config(tmp_path / "repository" / names.PREPROCESSING / "config.pbtxt")
    pre = from_parameters(PreprocessingParameters, names.PREPROCESSING,
                          {k: v.string_value for k, v in pre_config.parameters.items()})
    assert Feature.LORA in pre.engine().features and lora.served_from_parameter(pre.lora_adapters) == {"chat": 1, "sql": 2}
    _adapter(adapters, "zzz", 8, ["q_proj"])
    with pytest.raises(lora.LoraError, match="build it again with --lora-dir"):
        render_repository(engine, tmp_path / "other", lora_dir=adapters)

    # preprocessing refuses a task id the engine was not built with, naming the served ones
    preprocessor = Preprocessor(dataclasses.replace(pre, tokenizer_dir=default_checkpoint))
    request = lambda task: GenerateRequest(text="Hi", messages=None,  # noqa: E731
                                           feature_inputs=(("lora_task_id", np.array([task], np.uint64)),))
    assert preprocessor(request(2)).input_ids and preprocessor(request(0)).input_ids
    with pytest.raises(InvalidParameter, match=r"'lora_task_id' 3 is not a served LoRA adapter; served: 1 \(chat\), 2 \(sql\)"):
        preprocessor(request(3))


def test_the_relays_send_no_task_for_the_base_model():
    engine = {"input_ids": np.array([[1]]), "lora_task_id": np.array([[0]], np.uint64)}
    assert "lora_task_id" not in without_base_adapter(engine)
    engine["lora_task_id"] = np.array([[2]], np.uint64)
    assert without_base_adapter(engine) is engine


def test_the_module_table_is_the_same_in_every_version():
    from contract.upstream.backend_semantics import SUPPORTED_VERSIONS, backend_semantics

    tables = [backend_semantics(v).rule("lora.tensor_layout").extra["modules"] for v in SUPPORTED_VERSIONS]
    assert all(t == tables[0] for t in tables) and len(HF_TO_TRTLLM) == 7
