"""Rendered configs parse as Triton's ModelConfig and the ensemble is wired consistently."""

import importlib.util
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from build_engines.render import RenderError, check_ensemble_wiring, ensemble_config, python_model_config, read_config
from build_engines.repository import render_repository
from contract import names
from contract.model_configs import OpenVinoEngineParameters, PreprocessingParameters
from contract.model_parameters import from_parameters
from contract.tensors import ENGINE_INPUTS, ENGINE_OUTPUTS, ENSEMBLE_INPUTS, ENSEMBLE_OUTPUTS


@pytest.fixture(scope="module")
def repository(default_engine, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("repo") / "repository"
    render_repository(default_engine, out)
    return out


def test_repository_layout_and_configs_parse(repository):
    models = sorted(p.name for p in repository.iterdir())
    assert models == sorted([names.ENSEMBLE, names.PREPROCESSING, names.POSTPROCESSING, names.OPENVINO_ENGINE, names.LLM_BLS])
    configs = [read_config(repository / m / "config.pbtxt") for m in models]
    check_ensemble_wiring(configs)
    for m in models:
        assert (repository / m / "1").is_dir()
    for m in (names.PREPROCESSING, names.POSTPROCESSING, names.OPENVINO_ENGINE, names.LLM_BLS):
        source = (repository / m / "1" / "model.py").read_text()
        module = source.split("from ")[-1].split(" import")[0]
        assert importlib.util.find_spec(module) is not None, source  # imports the installed adapter


def test_ensemble_exposes_the_contract(repository):
    ens = read_config(repository / names.ENSEMBLE / "config.pbtxt")
    assert [i.name for i in ens.input] == [t.name for t in ENSEMBLE_INPUTS]
    assert [o.name for o in ens.output] == [t.name for t in ENSEMBLE_OUTPUTS]
    assert [s.model_name for s in ens.ensemble_scheduling.step] == [names.PREPROCESSING, names.OPENVINO_ENGINE, names.POSTPROCESSING]


def test_engine_config_is_decoupled_and_its_parameters_load(repository, default_engine):
    engine = read_config(repository / names.OPENVINO_ENGINE / "config.pbtxt")
    assert engine.model_transaction_policy.decoupled
    assert [i.name for i in engine.input] == [t.name for t in ENGINE_INPUTS]
    params = from_parameters(OpenVinoEngineParameters, engine.name, {k: {"string_value": v.string_value} for k, v in engine.parameters.items()})
    assert params.engine_dir == default_engine.resolve() and params.kv_cache_size_gb == 0  # grows on demand
    pre = read_config(repository / names.PREPROCESSING / "config.pbtxt")
    from_parameters(PreprocessingParameters, pre.name, {k: {"string_value": v.string_value} for k, v in pre.parameters.items()})


def test_no_placeholder_survives(repository):
    for cfg in repository.glob("*/config.pbtxt"):
        assert "${" not in cfg.read_text()


def _models(engine_outputs=ENGINE_OUTPUTS):
    from contract.tensors import (POSTPROCESSING_INPUTS, POSTPROCESSING_OUTPUTS, PREPROCESSING_INPUTS,
                                  PREPROCESSING_OUTPUTS)
    return [
        python_model_config("preprocessing", PREPROCESSING_INPUTS, PREPROCESSING_OUTPUTS, max_batch_size=8, parameters={}),
        python_model_config("engine", ENGINE_INPUTS, engine_outputs, max_batch_size=8, parameters={}, decoupled=True),
        python_model_config("postprocessing", POSTPROCESSING_INPUTS, POSTPROCESSING_OUTPUTS, max_batch_size=8, parameters={}),
        ensemble_config("engine", 8),
    ]


def test_wiring_check_accepts_the_real_pipeline():
    check_ensemble_wiring(_models())


def test_wiring_check_catches_a_missing_producer():
    models = _models(engine_outputs=ENGINE_OUTPUTS[:-1])  # engine no longer returns detokenize_params
    with pytest.raises(RenderError, match="output_map key 'detokenize_params' is not an output"):
        check_ensemble_wiring(models)


def test_wiring_check_catches_dtype_mismatch():
    models = _models()
    models[2].input[0].data_type = mc.TYPE_INT64
    with pytest.raises(RenderError, match="postprocessing: input 'output_ids' is TYPE_INT64 but"):
        check_ensemble_wiring(models)


def test_wiring_check_applies_tritons_decoupled_origin_rule():
    """Feeding postprocessing from preprocessing AND the decoupled engine is what Triton
    rejects ("receives inputs originated from different decoupled models")."""
    models = _models()
    post_step = models[3].ensemble_scheduling.step[2]
    post_step.input_map["detokenize_params"] = "_preprocessing_detokenize_params"
    with pytest.raises(RenderError, match="originate from different decoupled models"):
        check_ensemble_wiring(models)


def test_configs_round_trip_through_text_format():
    for config in _models():
        text = text_format.MessageToString(config)
        assert text_format.Parse(text, mc.ModelConfig()) == config


def test_the_openai_front_gets_the_served_tokenizer_and_model_name(repository, default_engine, tmp_path):
    """`make serve` starts the front with the tokenizer preprocessing uses (token texts of logprobs)."""
    from serving.openai_process import served_model_name, served_tokenizer_dir

    assert (served_tokenizer_dir(repository) / "tokenizer.json").is_file()
    assert served_model_name(repository) == "SmolLM2-135M-Instruct"
    assert served_tokenizer_dir(tmp_path) is None  # no repository there: the front runs without
    from serving.openai_process import OpenAiFront

    cmd = OpenAiFront(
        "127.0.0.1:1", "127.0.0.1", 9, "m", tmp_path / "log", tokenizer_dir=default_engine)._cmd
    assert cmd[-2:] == ["--tokenizer", str(default_engine)]
    assert cmd[cmd.index("--log-format") + 1] == "text"
    json_cmd = OpenAiFront("127.0.0.1:1", "127.0.0.1", 9, "m", tmp_path / "log", log_format="json")._cmd
    assert json_cmd[json_cmd.index("--log-format") + 1] == "json"  # `serving up --openai-log-format json`


def test_top_logprobs_follow_the_spec(repository, default_engine):
    """On by default (the engine model compiles its IR scorer and preprocessing lets
    top_logprobs through); `build --no-top-logprobs` renders neither."""
    import dataclasses

    from build_engines.repository import engine_features, openvino_engine_model
    from build_engines.spec import BuildSpec
    from contract.build_record import BuildRecord
    from contract.features import Feature

    pre = read_config(repository / names.PREPROCESSING / "config.pbtxt")
    assert "TOP_LOG_PROBS" in pre.parameters["engine_features"].string_value.split(",")
    spec = BuildSpec.from_dict(BuildRecord.read(default_engine).spec)
    assert spec.openvino.top_logprobs and Feature.TOP_LOG_PROBS in engine_features(spec).features
    off = dataclasses.replace(spec, openvino=dataclasses.replace(spec.openvino, top_logprobs=False))
    assert BuildSpec.from_dict(off.to_dict()) == off
    assert Feature.TOP_LOG_PROBS not in engine_features(off).features
    config = openvino_engine_model(default_engine, off).config
    assert config.parameters["top_logprobs"].string_value in ("false", "False", "0")


def test_preprocessing_records_the_tokenizer_class_autotokenizer_picks(repository):
    from model_repository.text.tokenizer_class import TokenizerClass, resolve

    pre = read_config(repository / names.PREPROCESSING / "config.pbtxt")
    params = from_parameters(PreprocessingParameters, pre.name,
                             {k: {"string_value": v.string_value} for k, v in pre.parameters.items()})
    recorded = TokenizerClass.recorded_in(params)
    assert recorded.known and recorded == resolve(params.tokenizer_dir)


def test_bench_peers_serves_an_exact_copy_beside_other_numerics(repository, tmp_path):
    from bench.peer_compare import ours_label, with_exact
    from build_engines.render import copy_repository

    assert with_exact(repository, tmp_path / "out") == [repository]  # the tests' default engine serves exact
    u8 = copy_repository(repository, tmp_path / "u8", names.OPENVINO_ENGINE, {"kv_cache_precision": "u8"})
    served = with_exact(u8, tmp_path / "out")
    assert served[0] == u8 and served[1] == tmp_path / "out" / "repository-exact"
    assert [ours_label(r) for r in served] == [
        "ours (f32 activations, u8 KV cache, dynamic quantization off)",
        "ours (exact)",
    ]


def test_preprocessing_says_what_the_deployment_computes_with(repository):
    pre = read_config(repository / names.PREPROCESSING / "config.pbtxt")
    assert pre.parameters["system_fingerprint"].string_value.startswith("fp_")
    assert pre.parameters["served_numerics"].string_value.startswith("exact: f32 activations")  # the tests pin exact
    assert pre.parameters["reproducible"].string_value.lower() in ("true", "1")
    params = from_parameters(PreprocessingParameters, pre.name, {k: {"string_value": v.string_value} for k, v in pre.parameters.items()})
    assert params.reproducible is True
