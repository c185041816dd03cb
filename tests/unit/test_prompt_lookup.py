"""Prompt-lookup speculative decoding on the CPU engine: the spec, what each request inherits,
and what a deployment with it refuses."""

from pathlib import Path

import numpy as np
import pytest

from build_engines.spec import BuildSpec
from build_engines.openvino.options import OpenVinoOptions
from build_engines.spec_base import SpecError
from contract.features import CPU_ENGINE, CPU_ENGINE_PROMPT_LOOKUP, refusals
from contract.model_configs import OpenVinoEngineParameters
from contract.model_parameters import from_parameters, to_parameters
from model_repository.engine_step.engine_inputs import EngineInputs


def test_off_by_default_and_round_trips():
    assert OpenVinoOptions().prompt_lookup is False
    spec = BuildSpec(Path("/c"), openvino=OpenVinoOptions(prompt_lookup=True, num_assistant_tokens=4, max_ngram_size=2))
    assert BuildSpec.from_dict(spec.to_dict()) == spec
    assert spec.artifact_fields() == BuildSpec(Path("/c")).artifact_fields()  # a serving setting: no rebuild


def test_the_kv_cache_defaults_to_the_activation_precision_and_a_named_precision_wins():
    """Unquantized keeps greedy answers equal to plain decoding's; u8 did not (build_engines/openvino/precision.py)."""
    assert OpenVinoOptions().kv_cache_precision == "f32"
    assert OpenVinoOptions(prompt_lookup=True).kv_cache_precision == "f32"
    assert OpenVinoOptions(activation_precision="bf16").kv_cache_precision == "bf16"
    assert OpenVinoOptions(prompt_lookup=True, kv_cache_precision="u8").kv_cache_precision == "u8"
    resolved = BuildSpec(Path("/c"), openvino=OpenVinoOptions(activation_precision="bf16")).to_dict()
    assert resolved["openvino"]["kv_cache_precision"] == "bf16"  # build.json records what was compiled


@pytest.mark.parametrize("flags, kv, exactness", [
    (("--numerics", "exact"), "f32", "greedy answers: the same alone or batched, from the prefix cache or a fresh "
                                     "prefill, and with speculative decoding as without"),
    (("--activation-precision", "bf16"), "bf16", "may change with the batch, the prefix cache and speculative "
                                                 "decoding, because of bf16 activations (15 of 16"),
    (("--numerics", "custom", "--kv-cache-precision", "u8"), "u8", "because of the u8 KV cache (6 of 16"),
    (("--dynamic-quantization-group-size", "32"), "f32", "because of dynamic activation quantization (16 of 16"),
])
def test_the_cli_follows_the_rule_unless_told_and_says_whether_answers_are_exact(default_checkpoint, flags, kv,
                                                                                 exactness):
    from click.testing import CliRunner

    from build_engines.cli import main

    result = CliRunner().invoke(main, ["plan", "--checkpoint", str(default_checkpoint), *flags])
    assert result.exit_code == 0, result.output
    assert f"activations, {kv} KV cache" in result.output
    assert exactness in result.output


def test_fast_numerics_keep_the_kv_cache_precision_given():
    """The KV cache's precision is a memory decision plan sizes: fast measures settings with it."""
    from click.testing import CliRunner

    from build_engines.cli import main

    result = CliRunner().invoke(main, ["plan", "--kv-cache-precision", "u8"])
    assert result.exit_code == 0, result.output
    assert "numerics (fast): the fastest setting within the gate, measured by the build on this host among: f32 " \
        "activations, u8 KV cache, dynamic quantization off; f32 activations, u8 KV cache, dynamic quantization 32" \
        in result.output
    assert "KV cache: " in result.output and "(u8: 1.1" in result.output


def test_only_f32_throughout_is_exact_and_unmeasured_numerics_say_so():
    from build_engines.openvino.precision import path_dependence

    assert path_dependence("f32", "f32", 0) == []
    assert path_dependence("f16", "f16", 0) == ["f16 activations (not measured)"]
    assert path_dependence("f32", "f16", 0) == ["the f16 KV cache (not measured; it rounds the keys and values)"]
    assert len(path_dependence("bf16", "u8", 32)) == 3


@pytest.mark.parametrize("field", ["num_assistant_tokens", "max_ngram_size"])
def test_draft_sizes_must_be_positive_naming_the_field(field):
    with pytest.raises(SpecError, match=f"'{field}' must be >= 1, got 0"):
        OpenVinoOptions(**{field: 0}).validate()
    with pytest.raises(ValueError, match=f"'{field}' must be >= 1, got 0"):
        OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=1, max_num_batched_tokens=8, **{field: 0}).validate()


def test_parameters_reach_the_engine_model_and_every_request():
    from model_repository.engines.openvino.openvino_backend import generation_config

    params = OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=1, max_num_batched_tokens=8,
                                      prompt_lookup=True, num_assistant_tokens=4, max_ngram_size=2)
    raw = {k: {"string_value": v} for k, v in to_parameters(params).items()}
    assert from_parameters(OpenVinoEngineParameters, "openvino_llm", raw) == params
    request = EngineInputs(input_ids=(1, 2, 3), input_lengths=3, request_output_len=4, end_id=2)
    gc = generation_config(request, params)
    assert (gc.num_assistant_tokens, gc.max_ngram_size) == (4, 2)
    plain = generation_config(request, OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=1, max_num_batched_tokens=8))
    assert not plain.num_assistant_tokens  # None: no assistant generation


def test_a_prompt_lookup_deployment_refuses_n_samples_but_not_guides():
    n2 = {"num_return_sequences": np.array([[2]], dtype=np.int32)}
    assert refusals(n2, CPU_ENGINE) == []
    [(name, reason)] = refusals(n2, CPU_ENGINE_PROMPT_LOOKUP)
    assert name == "num_return_sequences" and "prompt-lookup decoding" in reason
    guide = {"guided_decoding_guide_type": np.array([[b"regex"]], dtype=object)}
    assert refusals(guide, CPU_ENGINE_PROMPT_LOOKUP) == []


def test_min_tokens_is_refused_by_speculative_deployments_only():
    """OpenVINO GenAI lets EOS through before min_new_tokens once drafts are rejected
    (openvino_backend.assisted_generation_problems; measured in tests/integration/test_prompt_lookup.py)."""
    from model_repository.engines.openvino.openvino_backend import assisted_generation_problems

    def params(**kw):
        return OpenVinoEngineParameters(engine_dir=Path("/e"), max_num_seqs=1, max_num_batched_tokens=8, **kw)

    asks = EngineInputs(input_ids=(1, 2, 3), input_lengths=3, request_output_len=16, end_id=2, min_tokens=8)
    plain = EngineInputs(input_ids=(1, 2, 3), input_lengths=3, request_output_len=16, end_id=2)
    assert assisted_generation_problems(asks, params()) == []
    [lookup] = assisted_generation_problems(asks, params(prompt_lookup=True))
    assert "'min_tokens' (8)" in lookup and "prompt-lookup decoding" in lookup
    [draft] = assisted_generation_problems(asks, params(draft_model=True))
    assert "draft-model speculative decoding" in draft
    assert assisted_generation_problems(plain, params(prompt_lookup=True)) == []
