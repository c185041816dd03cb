"""Build tools' own output stays in the build log unless -v asks for it (third-party warnings
read like failures); a failure still shows the last lines."""

from __future__ import annotations

import sys

import pytest

from build_engines.process import BuildError, Echo, run_streaming

NOISY = [sys.executable, "-c", "print('Path.replace() takes 2 positional arguments but 3 were given')"]


def test_child_output_goes_to_the_log_only(tmp_path, capsys):
    run_streaming(NOISY, tmp_path / "build.log")
    assert "Path.replace()" in (tmp_path / "build.log").read_text()
    err = capsys.readouterr().err
    assert "Path.replace()" not in err and "build.log" in err


def test_verbose_echoes_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(Echo, "child_output", True)
    run_streaming(NOISY, tmp_path / "build.log")
    assert "Path.replace()" in capsys.readouterr().err


def test_a_failure_shows_the_tail(tmp_path):
    with pytest.raises(BuildError, match="boom"):
        run_streaming([sys.executable, "-c", "print('boom'); raise SystemExit(3)"], tmp_path / "build.log", what="export")
