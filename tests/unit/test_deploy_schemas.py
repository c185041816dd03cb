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


def test_ci_cases_cover_keda():
    assert "keda-values" in CASES
    kinds = {d["kind"] for r in chart.render(chart.load_values(CASES["keda-values"])) for d in r.documents}
    assert "ScaledObject" in kinds and "HorizontalPodAutoscaler" not in kinds


def test_ci_cases_cover_dynamo_and_the_network_policies():
    """The objects of the Dynamo mode (values.yaml `dynamo`) and the NetworkPolicies are among
    those the schema checks see."""
    assert "dynamo-cluster-values" in CASES
    rendered = chart.render(chart.load_values(CASES["dynamo-cluster-values"]))
    kinds = {d["kind"] for r in rendered for d in r.documents}
    assert {"NetworkPolicy", "Role", "RoleBinding", "ServiceAccount", "CustomResourceDefinition"} <= kinds
    assert sum(d["kind"] == "Deployment" for r in rendered for d in r.documents) == 2  # Triton + Dynamo's frontend


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


def test_checker_rejects_an_unknown_networkpolicy_field(full_render):
    policy = _object(full_render, "NetworkPolicy")
    assert not _problems(policy)
    policy["spec"]["ingress"][0]["sources"] = policy["spec"]["ingress"][0].pop("from")
    assert any("sources" in p.message for p in _problems(policy))


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


@pytest.fixture(scope="module")
def keda_render():
    return chart.render(chart.load_values([chart.CI_VALUES_DIR / "keda-values.yaml"]))


def test_checker_rejects_an_unknown_scaledobject_field(keda_render):
    scaled = _object(keda_render, "ScaledObject")
    assert not _problems(scaled)
    scaled["spec"]["triggers"][0]["metdata"] = scaled["spec"]["triggers"][0]["metadata"]
    assert [p.message for p in _problems(scaled)] == ["spec.triggers.0.metdata: unknown field"]
    scaled = _object(keda_render, "ScaledObject")
    scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["window"] = 60
    assert [p.message for p in _problems(scaled)] == [
        "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleUp.window: unknown field"]


@pytest.mark.parametrize("path, value", [
    (("spec", "minReplicaCount"), "two"),
    (("spec", "triggers", 0, "metadata", "threshold"), 6),  # KEDA's trigger metadata: strings only
    (("spec", "triggers"), {"type": "prometheus"}),
])
def test_checker_rejects_a_bad_scaledobject_type(keda_render, path, value):
    scaled = _object(keda_render, "ScaledObject")
    parent = scaled
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    problems = _problems(scaled)
    assert problems and all(p.message.startswith(".".join(map(str, path))) for p in problems), problems


def test_checker_rejects_a_scaledobject_without_its_target(keda_render):
    scaled = _object(keda_render, "ScaledObject")
    del scaled["spec"]["scaleTargetRef"]["name"]
    assert [p.message for p in _problems(scaled)] == ["spec.scaleTargetRef.name: Field required"]


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
    {"autoscaling": {"enabled": True, "keda": {"enable": True}}},  # typo: enabled
    {"autoscaling": {"enabled": True, "keda": {"enabled": True, "threshold": "four"}}},
    {"autoscaling": {"enabled": True, "keda": {"enabled": True, "pollingInterval": "30s"}}},
])
def test_values_schema_rejects_mistakes(values):
    with pytest.raises(chart.ChartError):
        chart.render(values)


@pytest.mark.parametrize("values, message", [
    ({"engineBuild": {"enabled": True}}, "engineBuild.command is required"),
    ({"triton": {"restrictedApi": {"http": ["health", "logging"]}}}, "must not restrict 'health'"),
    ({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}}, "minReplicas must be <="),
    ({"autoscaling": {"enabled": False, "keda": {"enabled": True}}},
     "autoscaling.keda.enabled needs autoscaling.enabled"),
    ({"autoscaling": {"enabled": True, "keda": {"enabled": True, "serverAddress": None}}},
     "(?s)/autoscaling/keda.*missing property 'serverAddress'"),
    ({"autoscaling": {"enabled": True, "keda": {"enabled": True, "query": None, "threshold": None}}},
     "(?s)/autoscaling/keda.*missing properties 'query', 'threshold'"),
    ({"autoscaling": {"enabled": True, "keda": {"enabled": True, "serverAddress": "prometheus:9090"}}},
     "/autoscaling/keda/serverAddress"),
])
def test_inconsistent_values_fail_with_a_message(values, message):
    with pytest.raises(chart.ChartError, match=message):
        chart.render(values)


def test_values_files_merge_like_helm():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1, "e": {"f": 1}}
    override = {"a": {"c": [3]}, "d": None, "e": {"g": 2}}
    assert chart.merge_values(base, override) == {"a": {"b": 1, "c": [3]}, "e": {"f": 1, "g": 2}}
