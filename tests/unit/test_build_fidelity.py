"""The build's fidelity step: the report lands in build.json and `inspect` shows it; an engine
beyond its gate is not published (kept aside as <engine>.rejected with its report).  The child
processes (export, fidelity report) are faked; the publishing logic around them is real."""

import json
import statistics
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


def fake_sweep(mean_kld: float, u8_tok_s: float = 21.0, dq_applied: bool = True) -> dict:
    """The numerics sweep's measurements: exact at `mean_kld`; dynamic quantization 32 a little
    worse and 1.3x faster; 64 beyond the int8 gate and fastest; 128 not applied (exact's logits);
    a u8 KV cache within the gate and 1.05x faster."""
    def candidate(act, kv, dq, kld, tok_s, selectable=True, not_applied=False):
        return {"numerics": {"activation_precision": act, "kv_cache_precision": kv,
                             "dynamic_quantization_group_size": dq},
                "selectable": selectable, "not_applied": not_applied, "fidelity": fake_report(kld),
                "speed": {} if not_applied else {"tok_s_1": tok_s, "tok_s_16": 4 * tok_s,
                                                 "runs": {"1": [tok_s] * 3, "16": [4 * tok_s] * 3}}}

    dq = [candidate("f32", "f32", 32, mean_kld * 1.5, 26.0), candidate("f32", "f32", 64, 0.02, 30.0)]
    if not dq_applied:
        dq = [candidate("f32", "f32", g, mean_kld, None, selectable=False, not_applied=True) for g in (32, 64)]
    return {"candidates": [candidate("f32", "f32", 0, mean_kld, 20.0), *dq,
                           candidate("f32", "f32", 128, mean_kld, None, selectable=False, not_applied=True),
                           candidate("f32", "u8", 0, mean_kld * 1.1, u8_tok_s)],
            "speed_settings": {"streams": [1, 16], "output_tokens": 32, "rounds": 2},
            "host": {"cpu": "test", "cores": 2, "cpu_flags": []}}


@pytest.fixture
def fake_children(monkeypatch):
    """export writes an IR file; fusion its record; the fidelity command writes a report with the
    mean KLD asked for, the numerics sweep its measurements (fake_sweep)."""
    state = {"mean_kld": 0.004, "steps": [], "sweep": {}}

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
            sweep = fake_sweep(state["mean_kld"], **state["sweep"])
            only = [json.loads(cmd[n + 1]) for n, arg in enumerate(cmd) if arg == "--only"]
            if only:  # a recorded decision: those settings' fidelity, no speed
                sweep["candidates"] = [c | {"speed": {}} for c in sweep["candidates"] if c["numerics"] in only]
                sweep["speed_settings"] = None
            Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps(sweep))
        elif what == "logprob agreement":
            setting = json.loads(cmd[cmd.index("--numerics") + 1])
            agreement = {"positions": 128, "top1_mismatches": state["mismatches"], "max_gap": 0.1 if state["mismatches"] else 0.0001}
            Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps({"numerics": setting} | agreement))

    state["mismatches"] = 0
    monkeypatch.setattr(openvino_build, "run_streaming", run_streaming)
    monkeypatch.setattr(openvino_build, "recorded_decisions", lambda: state.get("decisions", []))
    return state


def test_build_json_carries_the_report_and_inspect_shows_it(default_checkpoint, tmp_path, fake_children):
    engine = tmp_path / "int8"
    record = build_openvino_engine(BuildSpec(checkpoint=default_checkpoint), engine)
    # Fused before the numerics are measured: they measure the engine that is served.
    assert fake_children["steps"] == ["export", "projection fusion", "numerics", "logprob agreement"]
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
    from build_engines.openvino.numerics import EXACT, Numerics, numerics_lines, served_numerics
    from build_engines.plan_report import _measured_numerics

    engine = tmp_path / "int8"
    spec = BuildSpec(checkpoint=default_checkpoint)
    numerics = build_openvino_engine(spec, engine).numerics
    # 64 is faster but beyond the gate; 128 was not applied; u8 is within it but slower than 32
    assert numerics["fast"] == Numerics("f32", "f32", 32).to_dict()
    assert "1.30x the output tok/s" in numerics["why"] and "within the gate" in numerics["why"]
    assert served_numerics("fast", spec.openvino.pinned_numerics(), numerics) == Numerics("f32", "f32", 32)
    assert served_numerics("exact", spec.openvino.pinned_numerics(), numerics) == EXACT
    rows = {(r["numerics"]["kv_cache_precision"], r["numerics"]["dynamic_quantization_group_size"]): r
            for r in numerics["rows"]}
    assert rows[("f32", 64)]["problems"] and not rows[("f32", 32)]["problems"]
    lines = "\n".join(numerics_lines(spec.openvino, True, _measured_numerics(spec, engine), []))
    assert "numerics (fast): f32 activations, f32 KV cache, dynamic quantization 32" in lines
    assert "beyond gate" in lines and "not applied on this host" in lines and "f32 activations, u8 KV cache" in lines
    assert "* f32 activations, f32 KV cache, dynamic quantization 32" in lines


def test_a_u8_kv_cache_is_chosen_where_it_is_fastest_and_plan_sizes_the_pool_with_it(default_checkpoint, tmp_path,
                                                                                     fake_children):
    """An AVX2-only host: dynamic quantization not applied, a u8 cache 1.1x faster within the gate."""
    from build_engines.checkpoint import inspect_checkpoint
    from build_engines.openvino.numerics import Numerics
    from build_engines.openvino.options import OpenVinoOptions
    from build_engines.plan_report import plan_lines

    info, engine = inspect_checkpoint(default_checkpoint), tmp_path / "int8"
    spec = BuildSpec(checkpoint=default_checkpoint)
    before = "\n".join(plan_lines(spec, info, engine))
    assert "(f32: 4 bytes/element)" in before and "a u8 cache, if fast chooses it, takes 12.7 KiB/token" in before
    fake_children["sweep"] = {"u8_tok_s": 22.0, "dq_applied": False}
    numerics = build_openvino_engine(spec, engine).numerics
    assert numerics["fast"] == Numerics("f32", "u8", 0).to_dict() and "1.10x the output tok/s" in numerics["why"]
    after = "\n".join(plan_lines(spec, info, engine))
    assert "KV cache: 12.7 KiB/token (u8: 1.125 bytes/element)" in after and "until the build chooses" not in after
    assert "may change with the batch, the prefix cache and speculative decoding, because of the u8 KV cache" in after
    exact = BuildSpec(checkpoint=default_checkpoint, openvino=OpenVinoOptions(numerics="exact"))
    assert "KV cache: 45.0 KiB/token (f32: 4 bytes/element)" in "\n".join(plan_lines(exact, info, engine))


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
    from build_engines.openvino.cli_options import numerics_mode
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


def test_a_setting_faster_on_the_median_but_not_in_every_round_is_not_chosen():
    """The sweep's rounds are pairs measured side by side: a setting that lost one of them is noise
    on this host, not a default (seen: a u8 cache 1.30x on one build's medians, 1.00x on a rerun)."""
    from build_engines.openvino.numerics import EXACT, MeasuredRow, Numerics, choose_fast, round_gains

    base = {"1": [50.0, 60.0, 58.0], "16": [170.0, 175.0, 180.0]}
    noisy = {"1": [69.0, 55.0, 57.0], "16": [194.0, 210.0, 176.0]}  # median 1.10x, the last round lost
    steady = {"1": [55.0, 66.0, 64.0], "16": [187.0, 192.0, 198.0]}
    assert round_gains(base, base) == (1.0, 1.0, 1.0)
    gains = round_gains(noisy, base)
    assert gains[0] > 1 and gains[1] > 1 and gains[2] < 1

    def row(numerics, runs):
        return MeasuredRow(numerics, True, 0.0036, 0.018, -0.5, 96.9, "2/3", statistics.median(runs["1"]),
                           statistics.median(runs["16"]), round_gains=round_gains(runs, base))

    u8 = Numerics("f32", "u8", 0)
    chosen, why = choose_fast([row(EXACT, base), row(u8, noisy)])
    assert chosen == EXACT and "not faster in every round: f32 activations, u8 KV cache" in why
    assert "0.9" in why.split("rounds ")[-1]  # the lost round is named
    chosen, why = choose_fast([row(EXACT, base), row(u8, steady)])
    assert chosen == u8 and "faster in each of 3 rounds (rounds 1.10x, 1.10x, 1.10x)" in why
    assert MeasuredRow.from_dict(row(u8, steady).to_dict()) == row(u8, steady)


def test_fast_records_whether_top_logprobs_agree_and_which_path_chose(default_checkpoint, tmp_path, fake_children):
    from build_engines.openvino.numerics import numerics_lines
    from build_engines.repository import top_logprobs_withheld

    fake_children["mismatches"] = 3
    spec = BuildSpec(checkpoint=default_checkpoint)
    numerics = build_openvino_engine(spec, tmp_path / "int8").numerics
    assert numerics["chosen_by"] == {"path": "measured", "measured": numerics["chosen_by"]["measured"]}
    lines = "\n".join(numerics_lines(spec.openvino, True, numerics, []))
    assert f"(measured by this build, {numerics['chosen_by']['measured']})" in lines
    assert numerics["logprobs"]["numerics"] == numerics["fast"] and numerics["logprobs"]["agrees"] is False
    assert "disagree with the sampled tokens" in top_logprobs_withheld(spec, numerics)


def _decision(fast, checkpoint):
    """A decision recorded for this host, model and engine version (its key as the build makes it)."""
    from build_engines.checkpoint import checkpoint_hash
    from build_engines.openvino.build import decision_key
    from build_engines.openvino.numerics import Numerics
    from build_engines.openvino.numerics_decisions import RecordedDecision

    key = decision_key(BuildSpec(checkpoint=checkpoint), checkpoint_hash(checkpoint))
    return RecordedDecision(key, Numerics(*fast), "1.30x at 16 streams", "2026-12-02", "Intel Xeon (AMX)",
                            "docs/results/2026-12-02-numerics-decisions.md")


def test_a_recorded_decision_that_matches_skips_the_speed_sweep(default_checkpoint, tmp_path, fake_children):
    from build_engines.openvino.numerics import Numerics

    fake_children["decisions"] = [_decision(("f32", "u8", 0), default_checkpoint)]
    numerics = build_openvino_engine(BuildSpec(checkpoint=default_checkpoint), tmp_path / "int8").numerics
    assert fake_children["steps"] == ["export", "projection fusion", "numerics", "logprob agreement"]
    assert numerics["fast"] == Numerics("f32", "u8", 0).to_dict()  # the recorded one, not the sweep's 32
    assert numerics["chosen_by"]["path"] == "recorded" and numerics["chosen_by"]["measured"] == "2026-12-02"
    assert [r["numerics"]["kv_cache_precision"] for r in numerics["rows"]] == ["f32", "u8"]  # exact and it
    assert "recorded decision measured 2026-12-02 on Intel Xeon (AMX)" in numerics["why"]


def test_a_recorded_decision_beyond_the_gate_here_falls_back_to_the_sweep(default_checkpoint, tmp_path, fake_children):
    from build_engines.openvino.numerics import Numerics

    fake_children["decisions"] = [_decision(("f32", "f32", 64), default_checkpoint)]  # 64 is beyond the int8 gate here
    numerics = build_openvino_engine(BuildSpec(checkpoint=default_checkpoint), tmp_path / "int8").numerics
    assert fake_children["steps"] == ["export", "projection fusion", "numerics", "numerics", "logprob agreement"]
    assert numerics["fast"] == Numerics("f32", "f32", 32).to_dict() and numerics["chosen_by"]["path"] == "measured"


def test_measure_ignores_a_recorded_decision(default_checkpoint, tmp_path, fake_children):
    from build_engines.openvino.options import OpenVinoOptions

    fake_children["decisions"] = [_decision(("f32", "u8", 0), default_checkpoint)]
    spec = BuildSpec(checkpoint=default_checkpoint, openvino=OpenVinoOptions(numerics_decision="measure"))
    numerics = build_openvino_engine(spec, tmp_path / "int8").numerics
    assert numerics["chosen_by"]["path"] == "measured" and fake_children["steps"].count("numerics") == 1
