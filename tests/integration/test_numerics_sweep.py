"""The numerics sweep for real (issue 35): every candidate setting of the default engine measured
on this host against the float32 checkpoint and for speed, at a reduced size (the build runs the
`quick` evaluation and 32-token speed runs); the fast choice made from it; the rendered engine
model serving that choice, and exact on request."""

from __future__ import annotations

from dataclasses import replace

import pytest

from build_engines.fidelity import numerics_sweep
from build_engines.fidelity.evaluate import SETTINGS, EvalSettings, cpu_flags
from build_engines.openvino import numerics as numerics_module
from build_engines.openvino.numerics import EXACT, Numerics, candidates

pytestmark = pytest.mark.slow
# One window longer than the served chunk (512): its second chunk reads the first's keys and values
# back from the KV cache, where its precision shows (in one pass a u8 cache changes nothing).
SMALL = EvalSettings("quick", max_tokens=640, window=640, stride=640, prompts=0, answer_tokens=8)


@pytest.fixture(scope="module")
def measured(default_engine, default_checkpoint):
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(SETTINGS, "quick", SMALL)
        mp.setattr(numerics_sweep, "SPEED_TOKENS", 4)
        mp.setattr(numerics_sweep, "SPEED_ROUNDS", 2)
        mp.setattr(numerics_module, "DYNAMIC_QUANTIZATION_GROUPS", (32,))  # one group: each costs a fidelity pass
        result = numerics_sweep.sweep(default_engine, default_checkpoint, "f32", "quick", 0, 512, log=lambda m: None)
        result["candidates_here"] = [s for s, _ in candidates("f32", cpu_flags())]
        return result


def test_every_candidate_this_host_runs_is_measured(measured):
    settings = [Numerics.from_dict(c["numerics"]) for c in measured["candidates"]]
    assert settings == measured["candidates_here"] and settings[0] == EXACT
    by = {Numerics.from_dict(c["numerics"]): c for c in measured["candidates"]}
    exact = by[EXACT]["fidelity"]["logits"]
    assert exact["scored_tokens"] == 639 and exact["mean_kld"] > 0  # int8 weights: not the checkpoint's logits
    # a u8 KV cache rounds keys and values: other logits than exact's, so it is applied (and a
    # candidate) on every host
    u8 = by[Numerics("f32", "u8", 0)]
    assert u8["fidelity"]["logits"] != exact and not u8["not_applied"] and u8["selectable"]
    for setting, c in by.items():
        # a setting is "not applied" exactly when its logits are exact's to the last bit
        assert c["not_applied"] == (setting != EXACT and c["fidelity"]["logits"] == exact)
        assert bool(c["speed"]) != c["not_applied"]
        if c["speed"]:
            assert c["speed"]["tok_s_1"] > 0 and c["speed"]["tok_s_16"] > 0
            assert [len(runs) for runs in c["speed"]["runs"].values()] == [measured["speed_settings"]["rounds"]] * 2 == [2, 2]
    if not {"avx512_vnni", "avx_vnni", "amx_int8"} & set(cpu_flags()):
        # seen on an AVX2-only host: OpenVINO accepts the group and computes as without it
        assert by[Numerics("f32", "f32", 32)]["not_applied"]


def test_the_build_records_a_choice_the_renderer_serves(measured, default_checkpoint, default_engine, tmp_path):
    from build_engines.openvino.build import numerics_record
    from build_engines.repository import openvino_engine_model
    from build_engines.spec import BuildSpec

    spec = BuildSpec(checkpoint=default_checkpoint)
    fidelity, numerics = numerics_record(spec, measured)
    assert fidelity["engine"]["effective"]["DYNAMIC_QUANTIZATION_GROUP_SIZE"] == "0"  # the gate checks the spec's own
    chosen = Numerics.from_dict(numerics["fast"])
    row = next(r for r in numerics["rows"] if Numerics.from_dict(r["numerics"]) == chosen)
    assert row["selectable"] and not row["problems"]
    assert ("x the output tok/s" in numerics["why"]) != (chosen == EXACT), numerics["why"]

    def served(mode: str) -> dict:
        mode_spec = replace(spec, openvino=replace(spec.openvino, numerics=mode))
        params = openvino_engine_model(default_engine, mode_spec, numerics=numerics).config.parameters
        return {
            k: params[k].string_value
            for k in ("activation_precision", "kv_cache_precision", "dynamic_quantization_group_size")
        }

    assert served("fast") == {k: str(v) for k, v in chosen.to_dict().items()}
    assert served("exact") == {
        "activation_precision": "f32",
        "kv_cache_precision": "f32",
        "dynamic_quantization_group_size": "0",
    }


def test_top_logprobs_are_served_only_where_they_describe_the_sampled_tokens(measured, default_checkpoint, default_engine):
    """Issue 49 on this host: exact's alternatives agree with the pipeline's greedy tokens (the
    premise of serving them); the fast choice, and a setting that is applied on every host (a u8 KV
    cache), are measured as the build measures them, and the rendered deployment serves
    top_logprobs under each exactly when it agrees, refusing them by name otherwise."""
    from transformers import AutoTokenizer

    from build_engines.fidelity import logprob_agreement
    from build_engines.fidelity.evaluate import chat_prompt_ids
    from build_engines.fidelity.openvino_engine import compile_properties
    from build_engines.openvino.build import numerics_record
    from build_engines.repository import engine_features, top_logprobs_withheld
    from build_engines.spec import BuildSpec
    from contract.features import Feature

    spec = BuildSpec(checkpoint=default_checkpoint)
    _, numerics = numerics_record(spec, measured)
    prompts = chat_prompt_ids(AutoTokenizer.from_pretrained(str(default_checkpoint)), 2)

    def agreement(setting: Numerics):
        properties = compile_properties(default_engine, setting, 0)
        return logprob_agreement.measure(default_engine, properties, prompts, 512)

    exact = agreement(EXACT)
    assert exact.agrees, exact.describe()
    fast = Numerics.from_dict(numerics["fast"])
    for setting in {fast, Numerics("f32", "u8", 0)} - {EXACT}:
        result = agreement(setting)
        print(f"{setting.label}: {result.describe()}")
        record = numerics | {"fast": setting.to_dict(), "logprobs": {"numerics": setting.to_dict()} | result.to_dict()}
        served = Feature.TOP_LOG_PROBS in engine_features(spec, numerics=record).features
        assert served == result.agrees
        assert bool(top_logprobs_withheld(spec, record)) != result.agrees


def test_the_fidelity_command_reports_the_engine_it_is_given(default_engine, default_checkpoint, tmp_path):
    """`python -m build_engines.fidelity` (what a build with its report runs, and `make eval-quality`),
    at a reduced size with one greedy prompt: the report of the exact setting on the default engine."""
    import json

    from build_engines.fidelity import __main__ as fidelity_command

    out = tmp_path / "fidelity.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(SETTINGS, "quick", replace(SMALL, prompts=1))
        fidelity_command.main(["--engine-dir", str(default_engine), "--checkpoint", str(default_checkpoint),
                               "--activation-precision", "f32", "--kv-cache-precision", "f32",
                               "--dynamic-quantization-group-size", "0", "--out", str(out)])
    report = json.loads(out.read_text())
    assert report["settings"] == {"name": "quick", "max_tokens": 640, "window": 640, "stride": 640, "prompts": 1,
                                  "answer_tokens": 8}
    assert report["logits"]["scored_tokens"] == 639 and report["logits"]["mean_kld"] > 0
    assert report["greedy"]["prompts"] == 1 and report["greedy"]["answer_tokens"] == 8
