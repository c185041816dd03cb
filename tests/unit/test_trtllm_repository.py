"""The GPU model repository: every config.pbtxt parses as Triton's ModelConfig, the
ensemble is wired through engine_relay, and tensorrt_llm gets the spec's serving settings."""

import datetime
import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from build_engines.render import check_ensemble_wiring, read_config
from build_engines.repository import render_repository
from build_engines.spec_base import Precision
from build_engines.trtllm.options import GuidedDecodingBackend, SchedulerPolicy, TrtLlmServing
from contract import names
from contract.build_record import BuildRecord
from contract.features import Feature
from contract.model_configs import EngineRelayParameters, PreprocessingParameters
from contract.model_parameters import from_parameters
from contract.tensors import ENGINE_INPUTS, ENGINE_OUTPUTS, TRTLLM_INPUTS, TRTLLM_OUTPUTS
from contract.upstream.triton_models import load_models
from tests.unit.trtllm_fixtures import info_of, llama_8b_checkpoint, trtllm_spec, write_default_tokenizer

SERVING = TrtLlmServing(kv_cache_free_gpu_mem_fraction=0.85, enable_kv_cache_reuse=True, enable_chunked_context=True,
                        batch_scheduler_policy=SchedulerPolicy.MAX_UTILIZATION, max_queue_delay_microseconds=100,
                        max_queue_size=512, cancellation_check_period_ms=50)


def _params(config: mc.ModelConfig) -> dict[str, str]:
    return {k: v.string_value for k, v in config.parameters.items()}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("gpu")
    ckpt = llama_8b_checkpoint(root / "llama8b")
    spec = trtllm_spec(ckpt, Precision.FP8, tp_size=2, calib_dataset="c", serving=SERVING)
    engine = root / "engine"
    engine.mkdir()
    BuildRecord(backend="tensorrt_llm", spec=spec.to_dict(), checkpoint=info_of(ckpt).to_dict() | {"hash": "sha256:0"},
                versions={"tensorrt_llm": "1.1.0", "tensorrt": "10.13.3.9", "container": "25.12"},
                built_at=datetime.datetime.now().isoformat(), build_seconds=1.0).write(engine)
    write_default_tokenizer(engine / "tokenizer")
    out = root / "repository"
    render_repository(engine, out)
    return engine, out


def test_layout_and_every_config_parses(repo):
    engine, out = repo
    models = sorted(p.name for p in out.iterdir())
    assert models == sorted([names.ENSEMBLE, names.PREPROCESSING, names.POSTPROCESSING, names.ENGINE_RELAY,
                             names.TRTLLM_ENGINE, names.LLM_BLS])
    configs = [read_config(out / m / "config.pbtxt") for m in models]  # Triton's own schema
    check_ensemble_wiring(configs)
    for m in (names.PREPROCESSING, names.POSTPROCESSING, names.ENGINE_RELAY, names.LLM_BLS):
        assert (out / m / "1" / "model.py").is_file()
    assert (out / names.TRTLLM_ENGINE / "1").is_dir() and not (out / names.TRTLLM_ENGINE / "1" / "model.py").exists()
    for cfg in out.glob("*/config.pbtxt"):
        assert "${" not in cfg.read_text()


def test_ensemble_steps_through_the_relay(repo):
    ens = read_config(repo[1] / names.ENSEMBLE / "config.pbtxt")
    assert [s.model_name for s in ens.ensemble_scheduling.step] == [names.PREPROCESSING, names.ENGINE_RELAY,
                                                                    names.POSTPROCESSING]


def test_tensorrt_llm_config(repo):
    engine, out = repo
    cfg = read_config(out / names.TRTLLM_ENGINE / "config.pbtxt")
    assert cfg.backend == "tensorrtllm" and cfg.model_transaction_policy.decoupled
    version = BuildRecord.read(engine).spec["trtllm"]["trtllm_version"]
    nvidia = load_models(version)[names.TRTLLM_ENGINE]
    assert [i.name for i in cfg.input] == [t.name for t in nvidia.inputs]  # NVIDIA's declaration, as it is
    assert [o.name for o in cfg.output] == list(dict.fromkeys(t.name for t in nvidia.outputs))
    inputs, outputs = {i.name: i for i in cfg.input}, {o.name: o for o in cfg.output}
    for t in TRTLLM_INPUTS:  # what the relays send: accepted as it is typed
        assert inputs[t.name].data_type == mc.DataType.Value(t.dtype.config_name), t.name
    for t in TRTLLM_OUTPUTS:  # what the relays ask for
        assert outputs[t.name].data_type == mc.DataType.Value(t.dtype.config_name), t.name
    assert inputs["input_ids"].allow_ragged_batch and inputs["stop_words_list"].allow_ragged_batch
    assert inputs["request_output_len"].HasField("reshape") and list(inputs["request_output_len"].reshape.shape) == []
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 100
    assert cfg.dynamic_batching.default_queue_policy.max_queue_size == 512
    assert _params(cfg) == {
        "gpt_model_type": "inflight_fused_batching", "gpt_model_path": str(engine.resolve()), "max_beam_width": "1",
        "kv_cache_free_gpu_mem_fraction": "0.85", "enable_kv_cache_reuse": "true", "enable_chunked_context": "true",
        "batch_scheduler_policy": "max_utilization", "exclude_input_in_output": "true",
        "cancellation_check_period_ms": "50",
        # read without a fallback by the backend: must exist; tokenizer_dir is not used by the C++
        # workflow; guided decoding by xgrammar with the tokenizer info written beside the engine
        "tokenizer_dir": "", "guided_decoding_backend": "xgrammar",
        "xgrammar_tokenizer_info_path": str(engine.resolve() / "xgrammar_tokenizer_info.json"),
    }


def test_relay_config_and_parameters(repo):
    engine, out = repo
    relay = read_config(out / names.ENGINE_RELAY / "config.pbtxt")
    assert relay.model_transaction_policy.decoupled and not relay.HasField("dynamic_batching")
    assert [i.name for i in relay.input] == [t.name for t in ENGINE_INPUTS]
    assert [o.name for o in relay.output] == [t.name for t in ENGINE_OUTPUTS]
    params = from_parameters(EngineRelayParameters, relay.name, _params(relay))
    assert params.target_model == names.TRTLLM_ENGINE and params.engine_dir == engine.resolve()


def test_tokenizer_lives_beside_the_engine_config(repo):
    engine, out = repo
    pre = read_config(out / names.PREPROCESSING / "config.pbtxt")
    params = from_parameters(PreprocessingParameters, pre.name, _params(pre))
    assert params.tokenizer_dir == engine.resolve() / "tokenizer"  # engine/config.json is TensorRT-LLM's


def test_configs_round_trip_through_text_format(repo):
    for cfg_file in repo[1].glob("*/config.pbtxt"):
        config = read_config(cfg_file)
        assert text_format.Parse(text_format.MessageToString(config), mc.ModelConfig()) == config


def test_llm_bls_has_the_ensemble_contract_and_talks_to_tensorrt_llm(repo):
    engine, out = repo
    ens = read_config(out / names.ENSEMBLE / "config.pbtxt")
    bls = read_config(out / names.LLM_BLS / "config.pbtxt")
    assert bls.model_transaction_policy.decoupled
    ens_inputs = [(i.name, i.data_type) for i in ens.input]
    assert [(i.name, i.data_type) for i in bls.input][:len(ens_inputs)] == ens_inputs  # and NVIDIA's BLS-only inputs
    assert [(o.name, o.data_type) for o in bls.output] == [(o.name, o.data_type) for o in ens.output]
    params = from_parameters(EngineRelayParameters, bls.name, _params(bls))
    assert params.target_model == names.TRTLLM_ENGINE and params.engine_dir == engine.resolve()


def test_every_tensorrt_llm_parameter_is_one_upstream_declares(repo):
    engine, out = repo
    cfg = read_config(out / names.TRTLLM_ENGINE / "config.pbtxt")
    version = BuildRecord.read(engine).spec["trtllm"]["trtllm_version"]
    upstream = {p.key for p in load_models(version)[names.TRTLLM_ENGINE].parameters}
    assert set(_params(cfg)) <= upstream, set(_params(cfg)) - upstream


def test_guided_decoding_is_rendered_with_its_tokenizer_info(repo):
    """The default: the xgrammar decoder, its tokenizer info written beside the engine (what the
    tensorrt_llm parameter names), and preprocessing told the engine has guided decoding."""
    engine, out = repo
    cfg = read_config(out / names.TRTLLM_ENGINE / "config.pbtxt")
    info = Path(_params(cfg)["xgrammar_tokenizer_info_path"])
    assert info.parent == engine.resolve() and len(json.loads(info.read_text())["encoded_vocab"]) > 1000
    pre = from_parameters(PreprocessingParameters, names.PREPROCESSING,
                          _params(read_config(out / names.PREPROCESSING / "config.pbtxt")))
    assert Feature.GUIDED_DECODING in pre.engine().features


def test_guided_decoding_none_renders_it_off_and_refused(tmp_path):
    ckpt = llama_8b_checkpoint(tmp_path / "llama8b")
    spec = trtllm_spec(ckpt, Precision.FP16, serving=TrtLlmServing(guided_decoding_backend=GuidedDecodingBackend.NONE))
    engine = tmp_path / "engine"
    engine.mkdir()
    BuildRecord(backend="tensorrt_llm", spec=spec.to_dict(), checkpoint=info_of(ckpt).to_dict() | {"hash": "sha256:0"},
                versions={}, built_at="", build_seconds=1.0).write(engine)  # no tokenizer needed
    render_repository(engine, tmp_path / "repository")
    params = _params(read_config(tmp_path / "repository" / names.TRTLLM_ENGINE / "config.pbtxt"))
    assert params["guided_decoding_backend"] == params["xgrammar_tokenizer_info_path"] == ""
    pre = from_parameters(PreprocessingParameters, names.PREPROCESSING,
                          _params(read_config(tmp_path / "repository" / names.PREPROCESSING / "config.pbtxt")))
    assert Feature.GUIDED_DECODING not in pre.engine().features
    assert not (engine / "xgrammar_tokenizer_info.json").exists()
