from pathlib import Path

import pytest

from contract.model_configs import OpenVinoEngineParameters, PreprocessingParameters
from contract.model_parameters import ParameterError, from_parameters, parse_bool, to_parameters


def test_round_trip():
    p = OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=8, max_num_batched_tokens=256,
                                 kv_cache_size_gb=2, enable_prefix_caching=True)
    raw = {k: {"string_value": v} for k, v in to_parameters(p).items()}
    assert raw["enable_prefix_caching"] == {"string_value": "true"}
    assert from_parameters(OpenVinoEngineParameters, "openvino_llm", raw) == p


def test_errors_name_model_key_and_allowed_values():
    raw = {"engine_dir": "/e", "max_num_seqs": "many", "kv_cache_size_gb": "1", "typo_key": "1"}
    with pytest.raises(ParameterError) as e:
        from_parameters(OpenVinoEngineParameters, "openvino_llm", raw)
    text = str(e.value)
    assert text.startswith("model 'openvino_llm'")
    assert "unknown parameter(s) ['typo_key']" in text
    assert "'max_num_seqs' must be an integer, got 'many'" in text
    assert "missing required parameter 'max_num_batched_tokens'" in text


def test_validation_runs_at_load():
    raw = {"tokenizer_dir": "/t", "max_input_len": "100", "max_seq_len": "50", "default_max_tokens": "10"}
    with pytest.raises(ParameterError, match="'max_input_len' \\(100\\) must be < 'max_seq_len' \\(50\\)"):
        from_parameters(PreprocessingParameters, "preprocessing", raw)


@pytest.mark.parametrize("text,value", [("true", True), ("False", False), ("1", True), ("no", False)])
def test_bool(text, value):
    assert parse_bool("x", text) is value


def test_bool_rejects_anything_else():
    with pytest.raises(ParameterError, match="'x' must be true or false, got 'maybe'"):
        parse_bool("x", "maybe")


@pytest.mark.parametrize("version", ["1.1.0", "1.2.1"])
def test_the_cpu_engine_polls_cancellation_at_tensorrt_llm_s_default_period(version):
    from contract.upstream.backend_semantics import backend_semantics

    default = OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=8, max_num_batched_tokens=256)
    assert default.cancel_check_period_ms == backend_semantics(version).parameter("cancellation_check_period_ms").default
    with pytest.raises(ValueError, match="'cancel_check_period_ms' must be >= 0"):
        OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=8, max_num_batched_tokens=256,
                                 cancel_check_period_ms=-1).validate()
