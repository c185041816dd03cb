"""The kit's packages are clean for the linter and the formatter (ruff, configured in
pyproject.toml): the same command a contributor runs, `ruff check` and `ruff format --check`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The product and the benchmarks; tests and the stand-ins keep their own looser shape.
PACKAGES = ("contract", "model_repository", "build_engines", "serving", "cluster", "client", "openai_front", "deploy", "bench")


def _ruff() -> list[str]:
    try:
        import ruff  # noqa: F401
    except ImportError:
        pytest.skip("ruff is not installed (make venv installs it from requirements/lock.txt)")
    return [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_is_clean(command):
    result = subprocess.run([*_ruff(), *command, *PACKAGES], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_config_is_the_one_in_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert "[tool.ruff]" in text and "line-length = 120" in text
    assert not any((ROOT / name).exists() for name in ("ruff.toml", ".ruff.toml")), "one config: pyproject.toml"
