"""Load- and KV-aware routing through the Gateway API Inference Extension (pinned v1.5.0): the
chart's InferencePool, HTTPRoute and endpoint picker fit together and the engines' gauges,
and the vendored CRD schemas catch mistakes."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from contract import metrics
from deploy import chart, schema_check

GATEWAY = chart.CI_VALUES_DIR / "inference-gateway-values.yaml"


@pytest.fixture(scope="module")
def objects():
    return [d for r in chart.render(chart.load_values([GATEWAY])) for d in r.documents]


def one(objects, kind, suffix=""):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"{kind}*{suffix}: {[o['metadata']['name'] for o in found]}"
    return found[0]


def selects(selector: dict, labels: dict) -> bool:
    return selector.items() <= labels.items()


def test_pool_selects_the_server_pods_and_not_the_picker(objects):
    pool = one(objects, "InferencePool")
    server = one(objects, "Deployment", "llama-triton")["spec"]["template"]["metadata"]["labels"]
    picker = one(objects, "Deployment", "-epp")["spec"]["template"]["metadata"]["labels"]
    assert selects(pool["spec"]["selector"]["matchLabels"], server)
    assert not selects(pool["spec"]["selector"]["matchLabels"], picker)
    # no selector of the server's own objects reaches the picker's pods
    for service in (o for o in objects if o["kind"] == "Service" and not o["metadata"]["name"].endswith("-epp")):
        assert not selects(service["spec"]["selector"], picker)
    assert not selects(one(objects, "Deployment", "llama-triton")["spec"]["selector"]["matchLabels"], picker)


def test_pool_targets_the_openai_front_and_its_picker(objects):
    pool = one(objects, "InferencePool")["spec"]
    front_port = chart.default_values()["openai"]["port"]
    assert pool["targetPorts"] == [{"number": front_port}] and pool["appProtocol"] == "http"
    service = one(objects, "Service", "-epp")
    assert pool["endpointPickerRef"]["name"] == service["metadata"]["name"]
    assert pool["endpointPickerRef"]["port"]["number"] == service["spec"]["ports"][0]["port"]
    route = one(objects, "HTTPRoute")["spec"]
    assert route["parentRefs"][0] == {"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                      "name": "inference-gateway", "namespace": "gateways"}
    assert route["rules"][0]["backendRefs"] == [{"group": "inference.networking.k8s.io", "kind": "InferencePool",
                                                 "name": one(objects, "InferencePool")["metadata"]["name"]}]


def test_picker_reads_the_gauges_the_engines_export(objects):
    config = yaml.safe_load(one(objects, "ConfigMap", "-epp")["data"]["epp-config.yaml"])
    assert config["kind"] == "EndpointPickerConfig"
    extractor = next(p for p in config["plugins"] if p["type"] == "core-metrics-extractor")["parameters"]
    engine = next(e for e in extractor["engineConfigs"] if e["name"] == extractor["defaultEngine"])
    aliases = metrics.GAUGE_ALIASES
    assert engine["queuedRequestsSpec"] == aliases[metrics.REQUESTS_WAITING.name].selector
    assert engine["runningRequestsSpec"] == aliases[metrics.REQUESTS_RUNNING.name].selector
    assert engine["kvUsageSpec"] == aliases[metrics.KV_CACHE_USAGE.name].selector
    profile = config["schedulingProfiles"][0]["plugins"]
    assert {p["pluginRef"] for p in profile} == {"queue-scorer", "kv-cache-utilization-scorer"}
    args = one(objects, "Deployment", "-epp")["spec"]["template"]["spec"]["containers"][0]["args"]
    triton_metrics = chart.default_values()["triton"]["ports"]["metrics"]
    assert f"--model-server-metrics-port={triton_metrics}" in args  # the gauges live on Triton's port
    assert "--config-file=/config/epp-config.yaml" in args


def test_the_standard_names_are_upstreams_triton_names():
    """v1.5.0 factories.go defaultEngineConfigs "triton-tensorrt-llm" (pinned in deploy/crds/README.md)."""
    assert {a.selector for a in metrics.GAUGE_ALIASES.values()} == {
        "nv_trt_llm_request_metrics{request_type=waiting}", "nv_trt_llm_request_metrics{request_type=scheduled}",
        "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}"}


def test_vendored_schemas_name_their_pinned_release():
    for path in sorted(schema_check.CRD_DIR.glob("*.json")):
        source = json.loads(path.read_text())["source"]
        assert source["tag"] in ("v1.5.0", "v1.5.1") and len(source["commit"]) == 40, path.name


def _problems(doc):
    return schema_check.check([chart.RenderedTemplate("t.yaml", (doc,))])


def test_rendered_routing_objects_pass_their_crd_schemas(objects):
    for kind in ("InferencePool", "HTTPRoute"):
        assert _problems(one(objects, kind)) == []


def test_crd_schemas_catch_an_unknown_field_a_wrong_type_and_a_missing_field(objects):
    pool = copy.deepcopy(one(objects, "InferencePool"))
    pool["spec"]["targetPort"] = 9000
    assert any("targetPort" in p.message for p in _problems(pool))
    pool = copy.deepcopy(one(objects, "InferencePool"))
    pool["spec"]["endpointPickerRef"]["failureMode"] = "Maybe"
    assert _problems(pool)
    pool = copy.deepcopy(one(objects, "InferencePool"))
    del pool["spec"]["selector"]
    assert any("selector" in p.message for p in _problems(pool))
    route = copy.deepcopy(one(objects, "HTTPRoute"))
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = "heavy"
    assert _problems(route)


def test_routing_needs_the_openai_front():
    values = chart.merge_values(chart.load_values([GATEWAY]), {"openai": {"enabled": False}})
    with pytest.raises(chart.ChartError, match="needs openai.enabled"):
        chart.render(values)


def test_routing_is_off_by_default():
    kinds = {d["kind"] for r in chart.render(chart.default_values()) for d in r.documents}
    assert not kinds & {"InferencePool", "HTTPRoute", "Role"}
