"""Check rendered objects against the Kubernetes API schemas, offline.

Built-in kinds: the strict JSON schemas that kubernetes-validate ships for every minor
version from 1.25 (no unknown fields, right types, required fields).  We check against the
oldest version the chart supports (Chart.yaml kubeVersion) and the newest the package has.
ServiceMonitor and PrometheusRule (Prometheus Operator CRDs) and ScaledObject (KEDA): their
generated models (cloudcoil), which drop unknown fields; a field that does not survive the
round trip is an unknown field.  InferencePool and HTTPRoute (Gateway API and its Inference
Extension): their CRD schemas vendored from the pinned releases (deploy/crds/README.md),
closed to unknown fields.
An object of any other kind is an error: nothing passes unchecked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from deploy.chart import CHART_DIR, RenderedTemplate

# metadata.name: an RFC 1123 subdomain; Services also need an RFC 1035 label (<= 63).
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Problem:
    template: str
    obj: str  # "Kind/name"
    message: str

    def __str__(self) -> str:
        return f"{self.template}: {self.obj}: {self.message}"


def kube_versions(chart_dir: Path = CHART_DIR) -> tuple[str, ...]:
    """The oldest Kubernetes minor the chart declares, and the newest with a schema here."""
    import kubernetes_validate.utils as kv

    constraint = yaml.safe_load((chart_dir / "Chart.yaml").read_text())["kubeVersion"]
    oldest = re.search(r">=\s*v?(\d+\.\d+)", constraint)
    if not oldest:
        raise ValueError(f"Chart.yaml kubeVersion {constraint!r} names no minimum ('>=X.Y')")
    newest = kv.major_minor(kv.latest_version())
    return tuple(dict.fromkeys((oldest.group(1), newest)))


def check(rendered: list[RenderedTemplate], versions: tuple[str, ...] | None = None) -> list[Problem]:
    versions = versions or kube_versions()
    problems = []
    for item in rendered:
        for doc in item.documents:
            name = f"{doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"
            problems += [Problem(item.template, name, m) for m in check_object(doc, versions)]
    return problems


def check_object(doc: dict[str, Any], versions: tuple[str, ...]) -> list[str]:
    messages = _check_name(doc)
    custom = CUSTOM_KINDS.get((doc.get("apiVersion", ""), doc.get("kind", "")))
    if custom is not None:
        return messages + custom(doc)
    for version in versions:
        messages += [f"Kubernetes {version}: {m}" for m in _builtin(doc, version)]
    return messages


def _builtin(doc: dict[str, Any], version: str) -> list[str]:
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError

    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        where = ".".join(str(p) for p in e.path) or "(top)"
        return [f"{where}: {e.message}"]
    except SchemaNotFoundError as e:
        return [f"no schema: {e.message}"]
    return []


def _check_name(doc: dict[str, Any]) -> list[str]:
    name = (doc.get("metadata") or {}).get("name", "")
    if not SUBDOMAIN.match(name) or len(name) > 253:
        return [f"metadata.name {name!r} is not a valid Kubernetes name"]
    if doc.get("kind") == "Service" and (not DNS_LABEL.match(name) or len(name) > 63):
        return [f"metadata.name {name!r}: a Service name must be a DNS label of at most 63 characters"]
    return []


def _cloudcoil_kind(module: str, kind: str) -> Callable[[dict[str, Any]], list[str]]:
    """An object checked against cloudcoil's generated model of its CRD (`module`, e.g.
    cloudcoil.models.prometheus_operator.v1, pinned in requirements/lock.txt)."""

    def check(doc: dict[str, Any]) -> list[str]:
        import importlib

        from pydantic import ValidationError

        try:
            model = getattr(importlib.import_module(module), kind).model_validate(doc)
        except ValidationError as e:
            return [f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
        kept = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
        return [f"{path}: unknown field" for path in _dropped(doc, kept)]

    return check


def _dropped(original: Any, kept: Any, path: str = "") -> list[str]:
    """Paths present in `original` and missing from `kept` (what the model did not know)."""
    if isinstance(original, dict):
        kept = kept if isinstance(kept, dict) else {}
        return [
            p
            for key, value in original.items()
            for p in ([f"{path}{key}"] if key not in kept else _dropped(value, kept[key], f"{path}{key}."))
        ]
    if isinstance(original, list) and isinstance(kept, list):
        return [p for i, (a, b) in enumerate(zip(original, kept)) for p in _dropped(a, b, f"{path}{i}.")]
    return []


CRD_DIR = Path(__file__).resolve().parent / "crds"


def _closed(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused wherever it declares properties and does not
    keep unknown fields (x-kubernetes-preserve-unknown-fields): what the API server prunes."""
    schema = dict(schema)
    if "properties" in schema:
        schema["properties"] = {k: _closed(v) for k, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            schema["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            schema[key] = _closed(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            schema[key] = [_closed(s) for s in schema[key]]
    return schema


def _vendored_crd(file: str) -> Callable[[dict[str, Any]], list[str]]:
    """An object checked against a CRD schema vendored from its pinned release (deploy/crds/)."""

    def check(doc: dict[str, Any]) -> list[str]:
        import json

        import jsonschema

        vendored = json.loads((CRD_DIR / file).read_text())
        schema = _closed(vendored["openAPIV3Schema"])
        schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: checked by _check_name
        validator = jsonschema.Draft7Validator(schema)
        source = vendored["source"]
        where = f"{source['repository']} {source['tag']}"
        return [
            f"{'.'.join(map(str, e.path)) or '(top)'}: {e.message} (CRD schema of {where})"
            for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.path)))
        ]

    return check


PROMETHEUS_OPERATOR = "cloudcoil.models.prometheus_operator.v1"  # Prometheus Operator 0.80.1
KEDA = "cloudcoil.models.keda.v1alpha1"  # KEDA 2.16.1

CUSTOM_KINDS: dict[tuple[str, str], Callable[[dict[str, Any]], list[str]]] = {
    ("inference.networking.k8s.io/v1", "InferencePool"): _vendored_crd("inferencepool-v1.json"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): _vendored_crd("httproute-v1.json"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _cloudcoil_kind(PROMETHEUS_OPERATOR, "ServiceMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"): _cloudcoil_kind(PROMETHEUS_OPERATOR, "PrometheusRule"),
    ("keda.sh/v1alpha1", "ScaledObject"): _cloudcoil_kind(KEDA, "ScaledObject"),
}
