"""The product packages type-check clean under mypy, configured in pyproject.toml ([tool.mypy]).

mypy runs as `python -m mypy` with no targets, so the packages, the strictness and the
third-party modules allowed to lack types all come from the configuration; its cache lies
under build/ (cache_dir), so a rerun only checks what changed.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MYPY = PYPROJECT["tool"]["mypy"]


def test_mypy_checks_every_product_package():
    product = sorted(p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
    assert sorted(MYPY["packages"]) == product
    assert MYPY["check_untyped_defs"] and MYPY["warn_unused_ignores"]
    assert "ignore_missing_imports" not in MYPY  # allowed per third-party module only ([[tool.mypy.overrides]])


@pytest.mark.slow
def test_the_product_packages_type_check_clean():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed in this environment (requirements/lock.txt pins it: `make venv`)")
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, f"mypy found type errors:\n{result.stdout}{result.stderr}"
