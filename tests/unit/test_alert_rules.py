"""The SLO alerts (deploy/alerts.py): the committed rules file is current, promtool accepts
it, and `promtool test rules` (tests/promtool/llm-alerts.test.yaml) sees every alert fire
and not fire.  promtool comes from Debian's `prometheus` package (.ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from deploy import alerts

TEST_FILE = Path(__file__).resolve().parents[1] / "promtool" / "llm-alerts.test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (Debian: apt-get install prometheus; .ci/run does it as root)")


def _promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_committed_rules_file_is_current():
    assert alerts.RULES_FILE.read_text() == alerts.render(), "run: python -m deploy alerts"


def test_every_alert_is_tested_firing_and_not_firing():
    cases = [case for test in yaml.safe_load(TEST_FILE.read_text())["tests"] for case in test["alert_rule_test"]]
    for rule in alerts.rules():
        mine = [c for c in cases if c["alertname"] == rule.name]
        assert any(c["exp_alerts"] for c in mine), f"{rule.name}: no case where it fires"
        assert any(not c["exp_alerts"] for c in mine), f"{rule.name}: no case where it stays quiet"


def test_rules_cover_the_slo_list():
    names = {r.name for r in alerts.rules()}
    assert names == {"LLMTimeToFirstTokenP99High", "LLMInterTokenLatencyP99High", "LLMQueueGrowing",
                     "LLMKVCacheNearlyFull", "LLMErrorRatioHigh", "LLMReplicaNotReady"}


@needs_promtool
def test_promtool_checks_the_rules_file():
    result = _promtool("check", "rules", str(alerts.RULES_FILE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alerts.rules())} rules found" in result.stdout


@needs_promtool
def test_promtool_unit_tests_pass():
    result = _promtool("test", "rules", str(TEST_FILE))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_unit_tests_catch_a_wrong_threshold(tmp_path):
    """The same tests against rules with a looser TTFT SLO (5 s) must fail: they can."""
    rules_dir = tmp_path / "deploy" / "helm" / "llama-triton" / "files"
    rules_dir.mkdir(parents=True)
    (rules_dir / alerts.RULES_FILE.name).write_text(alerts.render(alerts.Slo(ttft_p99_s=5.0)))
    test_dir = tmp_path / "tests" / "promtool"
    test_dir.mkdir(parents=True)
    shutil.copy(TEST_FILE, test_dir / TEST_FILE.name)
    result = _promtool("test", "rules", str(test_dir / TEST_FILE.name))
    assert result.returncode != 0
    assert "LLMTimeToFirstTokenP99High" in result.stdout + result.stderr
