"""The build's fidelity step: the report lands in build.json and `inspect` shows it; an engine
beyond its gate is not published (kept aside as <engine>.rejected with its report).  The child
processes (export, fidelity report) are faked; the publishing logic around them is real."""

import json
from pathlib import Path

import pytest

from build_engines.openvino import build as openvino_build
from build_engines.fidelity.engine_cli import engine_summary
from build_engines.openvino.build import FIDELITY_FILE, BuildError, build_openvino_engine
from build_engines.spec import BuildSpec
from contract.build_record import BuildRecord


def fake_report(mean_kld: float) -> dict:
    return {"version": 1, "settings": {"name": "quick"},
            "text": {"name": "Python 3.11 stdlib pydoc_data/topics.py", "sha256": "sha256:" + "0" * 64},
            "reference": {"engine": "torch", "dtype": "float32"}, "engine": {"engine": "openvino", "properties": {}},
            "host": {"cpu": "test", "cores": 2, "cpu_flags": []},
            "logits": {"scored_tokens": 1535, "reference_ppl": 8.0, "engine_ppl": 8.01, "ppl_change_pct": 0.125,
                       "mean_kld": mean_kld, "p99_kld": 0.02, "max_kld": 0.05, "same_top1_pct": 96.5},
            "greedy": {"prompts": 3, "equal": 1, "first_difference_mean": 20.0, "first_token_differs": 0,
                       "answer_tokens": 48}}


def fake_sweep(mean_kld: float) -> dict:
    """The numerics sweep's measurements: exact at `mean_kld`; dynamic quantization 32 a little
    worse and 1.3x faster; 64 beyond the int8 gate and fastest; 128 not applied (exact's logits);
    a u8 KV cache reported only."""
    def candidate(act, kv, dq, kld, tok_s, selectable=True, not_applied=False):
        return {"numerics": {"activation_precision": act, "kv_cache_precision": kv,
                             "dynamic_quantization_group_size": dq},
                "selectable": selectable, "not_applied": not_applied, "fidelity": fake_report(kld),
                "speed": {} if not_applied else {"tok_s_1": tok_s, "tok_s_16": 4 * tok_s}}

    return {"candidates": [candidate("f32", "f32", 0, mean_kld, 20.0), candidate("f32", "f32", 32, mean_kld * 1.5, 26.0),
                           candidate("f32", "f32", 64, 0.02, 30.0),
                           candidate("f32", "f32", 128, mean_kld, None, selectable=False, not_applied=True),
                           candidate("f32", "u8", 0, mean_kld * 1.1, 21.0, selectable=False)],
            "speed_settings": {"streams": [1, 16], "output_tokens": 32, "rounds": 2},
            "host": {"cpu": "test", "cores": 2, "cpu_flags": []}}


@pytest.fixture
def fake_children(monkeypatch):
    """export writes an IR file; fusion its record; the fidelity command writes a report with the
    mean KLD asked for, the numerics sweep its measurements (fake_sweep)."""
    state = {"mean_kld": 0.004, "steps": []}

    def run_streaming(cmd, log_file, *, what="", append=False):
        state["steps"].append(what)
        if what == "export":
            Path(cmd[-1]).mkdir(parents=True, exist_ok=True)
            (Path(cmd[-1]) / "openvino_model.xml").write_text("<net/>")
        elif what == "projection fusion":
            Path(cmd[cmd.index("--record") + 1]).write_text(json.dumps({"groups": {"gate_proj+up_proj": 30}}))
        elif what == "fidelity report":
            Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps(fake_report(state["mean_kld"])))
        elif what == "numerics":
            Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps(fake_sweep(state["mean_kld"])))

    monkeypatch.setattr(openvino_build, "run_streaming", run_streaming)
    return state


def test_build_json_carries_the_report_and_inspect_shows_it(default_checkpoint, tmp_path, fake_children):
    engine = tmp_path / "int8"
    record = build_openvino_engine(BuildSpec(checkpoint=default_checkpoint), engine)
    # Fused before the numerics are measured: they measure the engine that is served.
    assert fake_children["steps"] == ["export", "projection fusion", "numerics"]
    assert BuildRecord.read(engine).fusion == {"groups": {"gate_proj+up_proj": 30}}
    stored = BuildRecord.read(engine).fidelity
    assert stored == record.fidelity and stored["logits"]["mean_kld"] == 0.004
    assert stored["gate"]["max_mean_kld"] == 0.008  # the int8 gate it passed, recorded beside it
    shown = engine_summary(engine)
    assert "KL divergence: mean 0.00400" in shown and "1535 tokens of Python 3.11" in shown
    assert "gate: mean KLD <= 0.008" in shown and "passed" in shown


def test_an_engine_beyond_its_gate_is_kept_aside(default_checkpoint, tmp_path, fake_children):
    fake_children["mean_kld"] = 0.02
    engine = tmp_path / "int8"
    with pytest.raises(BuildError, match=r"mean KL divergence 0\.0200 > 0\.008") as e:
        build_openvino_engine(BuildSpec(checkpoint=default_checkpoint), engine)
    assert "int8.rejected" in str(e.value)
    assert not engine.exists()
    assert json.loads((tmp_path / "int8.rejected" / FIDELITY_FILE).read_text())["logits"]["mean_kld"] == 0.02


def test_fidelity_off_measures_nothing(default_checkpoint, tmp_path, fake_children):
    from build_engines.fidelity.options import FidelityOptions

    spec = BuildSpec(checkpoint=default_checkpoint, fidelity=FidelityOptions(evaluation="off"))
    record = build_openvino_engine(spec, tmp_path / "int8")
    assert fake_children["steps"] == ["export", "projection fusion"] and not record.fidelity
    assert "fidelity: not measured" in engine_summary(tmp_path / "int8")


def test_fast_numerics_are_the_fastest_within_the_gate_and_recorded(default_checkpoint, tmp_path, fake_children):
    from build_engines.openvino.numerics import EXACT, Numerics, served_numerics
    from build_engines.plan_report import _numerics_lines

    engine = tmp_path / "int8"
    spec = BuildSpec(checkpoint=default_checkpoint)
    numerics = build_openvino_engine(spec, engine).numerics
    # 64 is faster but beyond the gate; 128 was not applied; u8 is the spec's decision (memory)
    assert numerics["fast"] == Numerics("f32", "f32", 32).to_dict()
    assert "1.30x the output tok/s" in numerics["why"] and "within the gate" in numerics["why"]
    assert served_numerics("fast", spec.openvino.pinned_numerics(), numerics) == Numerics("f32", "f32", 32)
    assert served_numerics("exact", spec.openvino.pinned_numerics(), numerics) == EXACT
    rows = {(r["numerics"]["kv_cache_precision"], r["numerics"]["dynamic_quantization_group_size"]): r
            for r in numerics["rows"]}
    assert rows[("f32", 64)]["problems"] and not rows[("f32", 32)]["problems"]
    lines = "\n".join(_numerics_lines(spec, engine))
    assert "numerics (fast): f32 activations, f32 KV cache, dynamic quantization 32" in lines
    assert "beyond gate" in lines and "not applied on this host" in lines and "reported only" in lines
    assert "* f32 activations, f32 KV cache, dynamic quantization 32" in lines


def test_exact_numerics_measure_the_one_setting_and_need_a_rebuild_for_fast(default_checkpoint, tmp_path,
                                                                            fake_children):
    from build_engines.cli import reuse_engine
    from build_engines.openvino.options import OpenVinoOptions

    engine = tmp_path / "int8"
    exact = BuildSpec(checkpoint=default_checkpoint, openvino=OpenVinoOptions(numerics="exact"))
    record = build_openvino_engine(exact, engine)
    assert fake_children["steps"] == ["export", "projection fusion", "fidelity report"] and not record.numerics
    assert not reuse_engine(engine, BuildSpec(checkpoint=default_checkpoint))  # fast has nothing to choose from
    build_openvino_engine(BuildSpec(checkpoint=default_checkpoint), engine)
    assert reuse_engine(engine, exact)  # a fast build serves exact as it is


def test_numerics_given_by_hand_are_custom_and_exact_refuses_them():
    from build_engines.cli_options import numerics_mode
    from build_engines.openvino.options import OpenVinoOptions
    from build_engines.spec_base import SpecError

    assert numerics_mode(None, None, None) == "fast" and numerics_mode("exact", None, None) == "exact"
    assert numerics_mode(None, "bf16", None) == "custom" and numerics_mode(None, None, 32) == "custom"
    with pytest.raises(SpecError, match="--numerics custom"):
        numerics_mode("fast", None, 32)
    assert OpenVinoOptions(dynamic_quantization_group_size=32).numerics == "custom"
    with pytest.raises(SpecError, match="'numerics' exact means f32 activations, f32 KV cache"):
        OpenVinoOptions(numerics="exact", kv_cache_precision="u8").validate()
    with pytest.raises(SpecError, match="'numerics' must be one of"):
        OpenVinoOptions(numerics="fastest").validate()
