"""The Helm chart, driven by Helm's own Go engine (helm-python-sdk bundles Helm v4's SDK as a
shared library, so `helm template` and `helm lint` need no helm binary; deploy.helm_engine
runs it).

Values files combine as with `helm -f a.yaml -f b.yaml`: maps merge key by key, anything
else is replaced by the later file, and null deletes a key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deploy import helm_engine

CHART_DIR = Path(__file__).resolve().parent / "helm" / "llama-triton"
CI_VALUES_DIR = CHART_DIR / "ci"
DEFAULT_RELEASE = "llama"
DEFAULT_NAMESPACE = "default"

# helm_python reports lint findings with Helm's severities.
LINT_SEVERITIES = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


class ChartError(RuntimeError):
    pass


@dataclass(frozen=True)
class RenderedTemplate:
    template: str  # e.g. "llama-triton/templates/deployment.yaml"
    documents: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class LintReport:
    errors: tuple[str, ...] = ()
    findings: tuple[str, ...] = field(default_factory=tuple)  # "SEVERITY path: message"


def merge_values(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_values(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_values(files: list[Path] | tuple[Path, ...]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in files:
        data = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(data, dict):
            raise ChartError(f"{path}: a values file must hold a mapping, got {type(data).__name__}")
        values = merge_values(values, data)
    return values


def default_values(chart_dir: Path = CHART_DIR) -> dict[str, Any]:
    return yaml.safe_load((chart_dir / "values.yaml").read_text())


def render(
    values: dict[str, Any],
    release: str = DEFAULT_RELEASE,
    namespace: str = DEFAULT_NAMESPACE,
    chart_dir: Path = CHART_DIR,
) -> list[RenderedTemplate]:
    """`helm template`: every template that produced at least one object, in template order."""
    try:
        files = helm_engine.render(chart_dir, values, release, namespace)
    except helm_engine.HelmFailure as e:
        raise ChartError(f"helm could not render {chart_dir.name}: {e}") from None
    rendered = []
    for template in sorted(files):
        if not template.endswith((".yaml", ".yml")):
            continue  # NOTES.txt and the like
        documents = tuple(d for d in yaml.safe_load_all(files[template]) if d)
        if documents:
            rendered.append(RenderedTemplate(template, documents))
    return rendered


def lint(values: dict[str, Any], chart_dir: Path = CHART_DIR, namespace: str = DEFAULT_NAMESPACE) -> LintReport:
    """`helm lint --strict`: warnings count as errors."""
    try:
        report = helm_engine.lint(chart_dir, values, namespace)
    except helm_engine.HelmFailure as e:
        raise ChartError(f"helm could not lint {chart_dir.name}: {e}") from None
    findings = tuple(
        f"{LINT_SEVERITIES.get(m['severity'], m['severity'])} {m['path']}: {m['error']}"
        for m in report.get("messages", [])
    )
    errors = tuple(str(e) for e in report.get("errors", []))
    errors += tuple(f for f, m in zip(findings, report.get("messages", [])) if m["severity"] >= 2)
    return LintReport(errors=errors, findings=findings)


def to_yaml(rendered: list[RenderedTemplate]) -> str:
    """The objects as one multi-document stream, each headed by its template (like helm template)."""
    parts = []
    for item in rendered:
        for document in item.documents:
            body = yaml.dump(document, Dumper=_BlockDumper, sort_keys=False, width=100)
            parts.append(f"---\n# Source: {item.template}\n{body}")
    return "".join(parts)


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (ConfigMap files) as literal blocks, readable as written."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)
