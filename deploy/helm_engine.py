"""Helm's Go engine (helm-python-sdk), run in a worker process of its own.

helm-python-sdk loads Helm's Go SDK, a Go runtime, into the calling process.  A Go runtime
shares signal handling with its host, and in the test session - which also runs gRPC's and
OpenVINO's threads - a later Helm call died with SIGSEGV.  So Helm runs in one spawned worker,
started on first use and reused; only plain data (dicts and strings) crosses over.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

_worker: ProcessPoolExecutor | None = None


class HelmFailure(RuntimeError):
    """Helm refused (bad values, a template error) or could not run; the message says which."""


def render(chart_dir: Path, values: dict[str, Any], release: str, namespace: str) -> dict[str, str]:
    """`helm template`: template path -> rendered text, after checking values.schema.json."""
    return _call(_render, str(chart_dir), values, release, namespace)


def lint(chart_dir: Path, values: dict[str, Any], namespace: str) -> dict[str, Any]:
    """`helm lint --strict`: {"messages": [{"severity", "path", "error"}], "errors": [...]}."""
    return _call(_lint, str(chart_dir), values, namespace)


def _call(fn, *args):
    global _worker
    if _worker is None:
        _worker = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    try:
        return _worker.submit(fn, *args).result()
    except BrokenProcessPool:
        _worker = None
        raise HelmFailure("the Helm worker process died") from None


# In the worker process:


def _helm():
    try:
        import helm_python
    except ImportError as e:  # the virtualenv is built from requirements/lock.txt
        raise HelmFailure(f"helm-python-sdk is not installed ({e}): run `make venv`") from None
    return helm_python


def _render(chart_dir: str, values: dict[str, Any], release: str, namespace: str) -> dict[str, str]:
    helm = _helm()
    try:
        with helm.Chart.load(chart_dir) as chart:
            chart.validate_schema(values)
            return chart.render(values, name=release, namespace=namespace, is_install=True)
    except helm.HelmError as e:
        raise HelmFailure(str(e)) from None


def _lint(chart_dir: str, values: dict[str, Any], namespace: str) -> dict[str, Any]:
    helm = _helm()
    try:
        return helm.lint(chart_dir, values, strict=True, namespace=namespace)
    except helm.HelmError as e:
        raise HelmFailure(str(e)) from None
