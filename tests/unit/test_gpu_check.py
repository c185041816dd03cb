"""`make gpu-check` without a GPU: which precisions and suites it runs for a GPU and an image,
the pytest commands it assembles, the JUnit reading, the budget, and the report (JSON and
markdown) it writes.  Running it needs a GPU host with the NGC image: not confirmed here."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import gpu_check
from bench.gpu_check_report import GpuCheckReport, PrecisionRun, SuiteCounts, markdown, read_junit, write

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.integration.test_gpu_pipeline" name="test_stream_equals_whole_equals_full_decode[0]"/>
<testcase classname="tests.integration.test_gpu_pipeline" name="test_short_benchmark"/>
<testcase classname="tests.integration.test_gpu_pipeline" name="test_return_log_probs[ensemble]">
  <failure message="assert 1 == 2">boom</failure></testcase>
<testcase classname="tests.integration.test_gpu_pipeline" name="test_docs_curl_generate[x]">
  <skipped message="no"/></testcase>
</testsuite></testsuites>"""
LEVELS = [{"concurrency": 1, "output_tokens_per_s": 410.5, "ttft_p50_s": 0.012, "itl_p50_s": 0.0021},
          {"concurrency": 16, "output_tokens_per_s": 5120.0, "ttft_p50_s": 0.031, "itl_p50_s": 0.0029}]


@pytest.mark.parametrize("sm,expected,left_out", [(90, ["fp16", "fp8"], 0), (100, ["fp16", "fp8"], 0),
                                                  (89, ["fp16"], 1), (80, ["fp16"], 1)])
def test_fp8_is_checked_on_hopper_or_newer(sm, expected, left_out):
    wanted, not_run = gpu_check.precisions(sm)
    assert wanted == expected and len(not_run) == left_out


@pytest.mark.parametrize("backend,suite_file", [("tensorrt_llm", "tests/integration/test_gpu_pipeline.py"),
                                                ("tensorrt_llm_pytorch", "tests/integration/test_gpu_pytorch.py")])
def test_each_precision_runs_the_gpu_marked_suites_of_its_flow(tmp_path, backend, suite_file):
    runs = gpu_check.check_runs(backend, ["fp16", "fp8"], tmp_path, python="python3")
    assert [r.precision for r in runs] == ["fp16", "fp8"]
    for run in runs:
        argv = list(run.argv)
        assert argv[:4] == ["python3", "-m", "pytest", suite_file]
        assert argv[argv.index("-m", 3) + 1] == "gpu"  # the GPU-marked tests are what it runs
        selection = argv[argv.index("-k") + 1]
        for suite in ("stream_equals_whole", "stop_words", "cancel", "bad_request", "echoes_the_prompt",
                      "short_benchmark"):
            assert suite in selection.split(" or ")
        assert f"--junitxml={run.junit}" in argv and run.junit.parent == tmp_path
        assert run.env[gpu_check.PRECISION_ENV] == run.precision
        assert run.env[gpu_check.BENCH_OUT_ENV] == str(run.bench_file)


def test_the_selection_names_real_gpu_tests():
    """Every suite of the selection selects at least one GPU test of each flow's file (collected
    here; they are skipped without a GPU)."""
    root = Path(__file__).resolve().parents[2]
    for suite_file in gpu_check.SUITE_FILES.values():
        result = subprocess.run([sys.executable, "-m", "pytest", suite_file, "--collect-only", "-q", "-m", "gpu",
                                 "-p", "no:cacheprovider"], cwd=root, capture_output=True, text=True, timeout=300)
        ids = [line for line in result.stdout.splitlines() if "::" in line]
        missing = {suite for suite in gpu_check.SUITES if not any(suite in i for i in ids)}
        allowed = {"stop_strings", "cancel"} if "pytorch" in suite_file else {"stop_strings"}
        assert missing <= allowed, (suite_file, missing)


def test_junit_counts_and_failures(tmp_path):
    path = tmp_path / "junit.xml"
    path.write_text(JUNIT)
    counts = read_junit(path)
    assert (counts.passed, counts.failed, counts.skipped) == (2, 1, 1)
    assert counts.failures == ("tests.integration.test_gpu_pipeline::test_return_log_probs[ensemble]",)
    assert not counts.ok
    missing = read_junit(tmp_path / "none.xml")
    assert not missing.ok and "pytest did not finish" in missing.failures[0]


def _report(runs, total_s=600.0, not_run=()):
    return GpuCheckReport("2026-11-27T10:00:00", {"tensorrt_llm": "1.2.1", "driver": "580.1"},
                          {"describe": "1 x NVIDIA H100 80GB HBM3 (SM 9.0, Hopper, 79.6 GiB)", "sm": 90},
                          "tensorrt_llm_pytorch: Triton 26.07 has the PyTorch backend", 900.0, 412.0, tuple(runs),
                          tuple(not_run), total_s)


def test_the_report_has_versions_gpu_pass_fail_and_numbers(tmp_path):
    good = PrecisionRun("fp16", "tensorrt_llm_pytorch", 0, 240.0, SuiteCounts(40, 0, 2), {"levels": LEVELS})
    bad = PrecisionRun("fp8", "tensorrt_llm_pytorch", 1, 300.0, SuiteCounts(39, 1, 2, ("t::test_x",)), {}, "E  boom")
    json_path, md_path = write(_report([good, bad]), tmp_path)
    data = json.loads(json_path.read_text())
    assert data["ok"] is False and data["within_budget"] is True
    assert data["versions"]["tensorrt_llm"] == "1.2.1" and data["gpu"]["sm"] == 90
    assert [r["ok"] for r in data["runs"]] == [True, False]
    assert data["runs"][0]["bench"]["levels"][1]["output_tokens_per_s"] == 5120.0
    text = md_path.read_text()
    assert text.startswith("# GPU check: FAIL")
    assert "| fp16 | tensorrt_llm_pytorch | pass | 40 | 0 | 2 | 240 s | c1: 410.5 output tok/s" in text
    assert "c16: 5120.0 output tok/s" in text and "`t::test_x`" in text and "E  boom" in text
    assert "tensorrt_llm 1.2.1" in text and "H100" in text and "image build 412 s (not in the budget)" in text


def test_a_check_passes_only_whole_and_within_budget():
    good = PrecisionRun("fp16", "tensorrt_llm", 0, 240.0, SuiteCounts(40, 0, 0), {"levels": LEVELS})
    assert _report([good]).ok and markdown(_report([good])).startswith("# GPU check: PASS")
    assert not _report([good], total_s=901.0).ok  # over the 15 minutes
    assert not _report([good], not_run=("fp8: SM 8.0 is older than Hopper",)).ok
    assert not _report([]).ok
    assert not _report([PrecisionRun("fp16", "tensorrt_llm", 0, 1.0, SuiteCounts(0, 0, 40))]).ok  # all skipped


def test_a_run_past_its_share_is_stopped_with_its_children(tmp_path):
    """The budget: pytest (and the server it started) killed as a group, reported as failed."""
    script = tmp_path / "slow.py"
    script.write_text("import subprocess, sys, time\n"
                      "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\ntime.sleep(60)\n")
    run = gpu_check.CheckRun("fp16", "tensorrt_llm", (sys.executable, str(script)), {}, tmp_path / "j.xml",
                             tmp_path / "b.json", tmp_path / "fp16.log")
    t0 = time.monotonic()
    result = gpu_check.run_one(run, 2.0, tmp_path)
    assert time.monotonic() - t0 < 20
    assert result.returncode != 0 and not result.ok and "share of the budget" in result.log_tail


def test_each_precision_gets_its_budget_from_the_time_plan():
    from bench.gpu_check_plan import RUN_BUDGET_S

    assert gpu_check.run_budgets("tensorrt_llm_pytorch", ["fp16", "fp8"], None) == [
        RUN_BUDGET_S[("tensorrt_llm_pytorch", "fp16")], RUN_BUDGET_S[("tensorrt_llm_pytorch", "fp8")]]
    assert gpu_check.run_budgets("tensorrt_llm", ["fp16", "fp8"], 300.0) == [150.0, 150.0]  # an explicit total


def test_the_report_says_the_calibration_data_is_not_cnn_dailymail(tmp_path):
    calibration = gpu_check.make_calibration(tmp_path)
    assert calibration["rows"] == 512 and Path(calibration["directory"]).name == "cnn_dailymail"
    good = PrecisionRun("fp8", "tensorrt_llm", 0, 240.0, SuiteCounts(40, 0, 0), {"levels": LEVELS})
    report = GpuCheckReport("2026-12-02T01:00:00", {}, {"describe": "H100"}, "tensorrt_llm: x", 900.0, None,
                            (good,), (), 250.0, calibration)
    assert "512 rows made here" in markdown(report) and "not cnn_dailymail" in markdown(report)
