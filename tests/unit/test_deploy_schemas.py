"""The chart renders, lints clean (strict) and every object passes the Kubernetes schemas, for
the default values and each ci/*-values.yaml - and the checks themselves catch mistakes."""

from __future__ import annotations

import copy

import pytest

from deploy import chart, schema_check
from deploy.cli import ci_values_files

CASES = {"default": []} | {p.stem: [p] for p in ci_values_files()}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    values = chart.load_values(CASES[request.param])
    return request.param, values, chart.render(values)


def test_ci_cases_cover_tp2_hpa_and_servicemonitor():
    assert "tp2-hpa-servicemonitor-values" in CASES and len(CASES) >= 3


def test_helm_lint_strict_is_clean(case):
    name, values, _ = case
    report = chart.lint(values)
    assert report.errors == (), f"{name}: {report.errors}"


def test_every_object_passes_the_kubernetes_schemas(case):
    name, _, rendered = case
    assert rendered, f"{name} rendered nothing"
    assert schema_check.check(rendered) == [], name


def test_schemas_cover_the_oldest_supported_and_the_newest_kubernetes():
    versions = schema_check.kube_versions()
    assert versions[0] == "1.27" and len(versions) == 2 and versions[1] > versions[0]


@pytest.fixture(scope="module")
def full_render():
    return chart.render(chart.load_values([chart.CI_VALUES_DIR / "tp2-hpa-servicemonitor-values.yaml"]))


def _object(rendered, kind):
    return copy.deepcopy(next(d for r in rendered for d in r.documents if d["kind"] == kind))


def _problems(doc):
    return schema_check.check([chart.RenderedTemplate("t.yaml", (doc,))])


def test_checker_rejects_an_unknown_field(full_render):
    deployment = _object(full_render, "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    assert any("readinessProbes" in p.message for p in _problems(deployment))


def test_checker_rejects_a_wrong_type(full_render):
    deployment = _object(full_render, "Deployment")
    deployment["spec"]["replicas"] = "two"
    assert _problems(deployment)


def test_checker_rejects_a_missing_required_field(full_render):
    service = _object(full_render, "Service")
    del service["spec"]["ports"][0]["port"]
    assert _problems(service)


def test_checker_rejects_an_unknown_servicemonitor_field(full_render):
    monitor = _object(full_render, "ServiceMonitor")
    monitor["spec"]["endpoints"][0]["scrapeEvery"] = "15s"
    assert [p.message for p in _problems(monitor)] == ["spec.endpoints.0.scrapeEvery: unknown field"]


def test_checker_rejects_a_bad_servicemonitor_type(full_render):
    monitor = _object(full_render, "ServiceMonitor")
    monitor["spec"]["endpoints"] = "metrics"
    assert _problems(monitor)


def test_checker_rejects_an_unknown_prometheusrule_field(full_render):
    rule = _object(full_render, "PrometheusRule")
    assert not _problems(rule)
    rule["spec"]["groups"][0]["rules"][0]["firing_for"] = "5m"
    assert [p.message for p in _problems(rule)] == ["spec.groups.0.rules.0.firing_for: unknown field"]


def test_checker_rejects_unknown_kinds_and_bad_names(full_render):
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert any("no schema" in p.message for p in _problems(unknown))
    service = _object(full_render, "Service")
    service["metadata"]["name"] = "Llama_Triton"
    assert _problems(service)


@pytest.mark.parametrize("values", [
    {"engine": {"tensorParallelSize": 0}},
    {"autoscaling": {"enable": True}},  # typo: enabled
    {"triton": {"restrictedApi": {"http": ["admin"]}}},
    {"triton": {"ports": {"http": "8000"}}},
    {"storage": {"mountPath": "models"}},
])
def test_values_schema_rejects_mistakes(values):
    with pytest.raises(chart.ChartError):
        chart.render(values)


@pytest.mark.parametrize("values, message", [
    ({"engineBuild": {"enabled": True}}, "engineBuild.command is required"),
    ({"triton": {"restrictedApi": {"http": ["health", "logging"]}}}, "must not restrict 'health'"),
    ({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}, "minReplicas must be <="),
])
def test_inconsistent_values_fail_with_a_message(values, message):
    with pytest.raises(chart.ChartError, match=message):
        chart.render(values)


def test_values_files_merge_like_helm():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1, "e": {"f": 1}}
    override = {"a": {"c": [3]}, "d": None, "e": {"g": 2}}
    assert chart.merge_values(base, override) == {"a": {"b": 1, "c": [3]}, "e": {"f": 1, "g": 2}}
