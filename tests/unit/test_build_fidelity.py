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


@pytest.fixture
def fake_children(monkeypatch):
    """export writes an IR file; fusion its record; the fidelity command writes a report with the
    mean KLD asked for."""
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

    monkeypatch.setattr(openvino_build, "run_streaming", run_streaming)
    return state


def test_build_json_carries_the_report_and_inspect_shows_it(default_checkpoint, tmp_path, fake_children):
    engine = tmp_path / "int8"
    record = build_openvino_engine(BuildSpec(checkpoint=default_checkpoint), engine)
    # Fused before the fidelity report: it measures the engine that is served.
    assert fake_children["steps"] == ["export", "projection fusion", "fidelity report"]
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
