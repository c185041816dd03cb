"""The one PASS/FAIL table of client libraries and tools (tests/integration/compat_table.py)."""

from __future__ import annotations

import json

import pytest

from tests.integration.compat_table import (
    ASKED_LENGTH,
    CLIENT,
    COMPLETES,
    EVAL_FEATURES,
    LATENCIES,
    LOGLIKELIHOOD,
    NOT_APPLICABLE,
    NOT_RUN,
    TOOL,
    Report,
)


def test_clients_and_tools_share_one_table_with_every_feature_a_column(tmp_path):
    report = Report()
    report.table().add("openai", {"text": "pass", "streaming": "fail: no deltas"}, CLIENT, ("text", "streaming"))
    row = report.row("guidellm 0.8.1", "chat, 2 streams")
    assert row.check(COMPLETES, True) and not row.check(ASKED_LENGTH, False, "lengths {31, 32}")
    report.row("lm-eval 0.4.9", features=EVAL_FEATURES).check(LOGLIKELIHOOD, True)
    ((path, lines),) = report.write(tmp_path)
    assert path == tmp_path / "table.md" and path.read_text().splitlines() == lines
    assert lines[0] == (
        "| client or tool | kind | text | streaming | "
        + " | ".join([COMPLETES, ASKED_LENGTH, LATENCIES])
        + " | "
        + " | ".join(EVAL_FEATURES)
        + " |"
    )
    assert lines[2] == "| openai | client library | pass | fail | n/a | n/a | n/a | n/a | n/a |"
    # the check not reached is `not run`, a feature the row does not have `n/a`
    assert lines[3] == "| guidellm 0.8.1 (chat, 2 streams) | tool | n/a | n/a | pass | fail | not run | n/a | n/a |"
    assert lines[4] == "| lm-eval 0.4.9 | tool | n/a | n/a | n/a | n/a | n/a | pass | not run |"
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert rows[1]["results"] == {COMPLETES: "pass", ASKED_LENGTH: "fail: lengths {31, 32}", LATENCIES: NOT_RUN}
    assert rows[0]["results"]["streaming"] == "fail: no deltas"


def test_client_rows_come_first_whatever_ran_first(tmp_path):
    report = Report()
    report.row("AIPerf 0.13.0").check(COMPLETES, True)
    report.table().add("openai", {"text": "pass"})
    ((_, lines),) = report.write(tmp_path)
    assert lines[0].startswith("| client or tool | kind | text | " + COMPLETES)
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| openai", "| AIPerf 0.13.0"]


def test_assert_passed_names_every_failed_feature_and_why():
    row = Report().row("AIPerf 0.13.0", kind=TOOL)
    row.check(COMPLETES, False, "2 errors")
    row.check(LATENCIES, False, "ITL 0")
    with pytest.raises(AssertionError) as failed:
        row.assert_passed()
    assert "2 errors" in str(failed.value) and "ITL 0" in str(failed.value)
    Report().row("genai-perf 0.0.16").assert_passed()  # nothing failed (nothing ran): no error


def test_a_feature_the_row_does_not_declare_is_refused():
    row = Report().row("guidellm 0.8.1")
    with pytest.raises(ValueError, match="not one of its features"):
        row.check("Responses API", True)
    assert row.result("Responses API") == NOT_APPLICABLE


def test_each_layout_writes_its_own_table_and_empty_tables_nothing(tmp_path):
    report = Report()
    report.table("pytorch_server").add("openai", {"text": "pass"})
    report.table()  # made, no rows
    written = report.write(tmp_path)
    assert [path.name for path, _ in written] == ["table-pytorch_server.md"]
    assert (tmp_path / "results-pytorch_server.json").is_file() and not (tmp_path / "table.md").exists()


def test_rows_name_a_tool_by_the_version_its_lock_pins():
    from bench import aiperf
    from bench.environments import pinned

    assert pinned("aiperf", "aiperf") == aiperf.VERSION  # AIPerf's GENERATOR, the row's name
    assert pinned("client-compat", "langchain-openai").count(".") == 2
    with pytest.raises(ValueError, match="pins no not-a-package"):
        pinned("guidellm", "not-a-package")
