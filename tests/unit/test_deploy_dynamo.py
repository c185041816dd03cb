"""The chart beyond one replica and who may reach what (values.yaml `dynamo` and `networkPolicy`):
many Triton replicas behind NVIDIA Dynamo's frontend, the worker beside Triton in each pod with
the command cluster/topology.py gives it on one host (compared, so the two cannot drift), Dynamo's
kubernetes discovery (labels, RBAC, the token in the worker container only), and NetworkPolicies
that let only the named peers reach Triton's unauthenticated ports - read from the rendered
objects with a small evaluator of NetworkPolicy semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.dynamo_names import ENDPOINT, NAMESPACE
from cluster.topology import ClusterSpec, RouterMode
from contract import names
from deploy import chart

CLUSTER = chart.CI_VALUES_DIR / "dynamo-cluster-values.yaml"
DISCOVERY_LABELS = {"nvidia.com/dynamo-discovery-backend": "kubernetes", "nvidia.com/dynamo-discovery-enabled": "true"}
ANY = "any source"


def render(values=None, files=()):
    rendered = chart.render(chart.merge_values(chart.load_values(list(files)), values or {}))
    return [d for r in rendered for d in r.documents]


def named(objects, kind, name):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {[o['metadata']['name'] for o in objects if o['kind'] == kind]}"
    return found[0]


def kinds(objects, kind):
    return [o for o in objects if o["kind"] == kind]


FULL = "llama-llama-triton"  # the default release's fullname
TRITON_PODS = {"app.kubernetes.io/name": "llama-triton", "app.kubernetes.io/instance": "llama"}
FRONTEND_PODS = {"app.kubernetes.io/name": "llama-triton-frontend", "app.kubernetes.io/instance": "llama",
                 "app.kubernetes.io/component": "dynamo-frontend"}


def triton_pod(objects):
    return named(objects, "Deployment", FULL)["spec"]["template"]


def containers(objects, deployment=FULL):
    return {c["name"]: c for c in named(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"]}


def env(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.fixture(scope="module")
def default():
    return render()


@pytest.fixture(scope="module")
def cluster():
    return render(files=[CLUSTER])


# --- who may reach a pod's port: NetworkPolicy semantics, ingress --------------------------------
def _matches(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # the chart uses matchLabels only
    return selector.get("matchLabels", {}).items() <= labels.items()


def allowed_peers(objects, pod_labels: dict, port: int):
    """The peers that may open `port` on a pod with these labels: ANY, or the list of
    NetworkPolicyPeers of every rule that admits the port; None when no policy selects the pod
    (not isolated: anything may)."""
    policies = [p for p in kinds(objects, "NetworkPolicy") if _matches(p["spec"]["podSelector"], pod_labels)
                and "Ingress" in p["spec"]["policyTypes"]]
    if not policies:
        return None
    peers = []
    for policy in policies:
        for rule in policy["spec"].get("ingress") or []:
            ports = rule.get("ports")
            admitted = ports is None or any(p.get("port") == port and p.get("protocol", "TCP") == "TCP" for p in ports)
            if not admitted:
                continue
            if not rule.get("from"):
                return ANY
            peers += rule["from"]
    return peers


def _pod_peer(labels):
    return {"podSelector": {"matchLabels": labels}}


def test_network_policy_is_on_by_default_and_closes_tritons_apis(default):
    assert chart.default_values()["networkPolicy"]["enabled"] is True
    [policy] = kinds(default, "NetworkPolicy")
    assert policy["spec"]["podSelector"]["matchLabels"] == TRITON_PODS
    # HTTP and gRPC have no authentication: nobody but the pod itself (loopback) and its node
    assert allowed_peers(default, TRITON_PODS, names.DEFAULT_HTTP_PORT) == []
    assert allowed_peers(default, TRITON_PODS, names.DEFAULT_GRPC_PORT) == []
    # metrics: the Prometheus pods only
    scrapers = chart.default_values()["networkPolicy"]["metricsScrapers"]
    assert allowed_peers(default, TRITON_PODS, names.DEFAULT_METRICS_PORT) == scrapers
    prometheus = {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    assert scrapers == [{"namespaceSelector": {}, "podSelector": prometheus}]
    # the OpenAI front authenticates with its key: open, unless openaiClients names its clients
    assert allowed_peers(default, TRITON_PODS, chart.default_values()["openai"]["port"]) == ANY
    assert allowed_peers(default, TRITON_PODS, 9110) == []  # nothing else


def test_named_clients_reach_only_their_ports():
    perf = _pod_peer({"app": "perf-analyzer"})
    gateway = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateways"}}}
    objects = render({"networkPolicy": {"tritonClients": [perf], "openaiClients": [gateway], "metricsScrapers": []}})
    for port in (names.DEFAULT_HTTP_PORT, names.DEFAULT_GRPC_PORT):
        assert allowed_peers(objects, TRITON_PODS, port) == [perf]
    assert allowed_peers(objects, TRITON_PODS, names.DEFAULT_METRICS_PORT) == []  # no scrapers: none
    assert allowed_peers(objects, TRITON_PODS, 9000) == [gateway]


def test_the_endpoint_picker_scrapes_the_metrics_port_with_the_gateway_on():
    objects = render(files=[chart.CI_VALUES_DIR / "inference-gateway-values.yaml"])
    epp = _pod_peer({"app.kubernetes.io/name": "llama-triton-epp", "app.kubernetes.io/instance": "llama",
                     "app.kubernetes.io/component": "endpoint-picker"})
    assert epp in allowed_peers(objects, TRITON_PODS, names.DEFAULT_METRICS_PORT)
    assert allowed_peers(objects, TRITON_PODS, names.DEFAULT_GRPC_PORT) == []


def test_no_rule_at_all_renders_a_deny_all_policy():
    objects = render({"openai": {"enabled": False}, "networkPolicy": {"metricsScrapers": []}})
    [policy] = kinds(objects, "NetworkPolicy")
    assert policy["spec"]["ingress"] == []


def test_network_policy_can_be_left_out():
    assert not kinds(render({"networkPolicy": {"enabled": False}}), "NetworkPolicy")
    assert not kinds(render({"networkPolicy": {"enabled": False}}, files=[CLUSTER]), "NetworkPolicy")


def test_dynamo_is_off_by_default(default):
    assert chart.default_values()["dynamo"]["enabled"] is False
    assert [o["metadata"]["name"] for o in kinds(default, "Deployment")] == [FULL]
    assert "dynamo-worker" not in containers(default)
    assert not kinds(default, "Role") and not kinds(default, "CustomResourceDefinition")
    assert not DISCOVERY_LABELS.items() <= triton_pod(default)["metadata"]["labels"].items()


# --- the cluster: Dynamo's frontend, a worker per Triton pod -------------------------------------
def test_each_triton_pod_is_one_replica_with_its_worker_beside_it(cluster):
    values = chart.load_values([CLUSTER])
    deployment = named(cluster, "Deployment", FULL)
    assert deployment["spec"]["replicas"] == values["replicaCount"] == 4
    pod = containers(cluster)
    assert set(pod) == {"triton", "dynamo-worker"}  # Dynamo's frontend serves the API, not the OpenAI front
    # one TensorRT-LLM replica per TP group: the pod's GPUs are the engine's world size
    assert pod["triton"]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert "nvidia.com/gpu" not in pod["dynamo-worker"]["resources"].get("limits", {})
    assert pod["dynamo-worker"]["image"] == "registry.example.com/llama-triton-kit-dynamo:1.6.1"
    assert not [o for o in cluster if o["kind"] == "Secret" and o["metadata"]["name"].endswith("-openai")]
    assert "openai" not in {p["name"] for p in named(cluster, "Service", FULL)["spec"]["ports"]}


def test_the_workers_command_is_the_topologys(cluster):
    """cluster/topology.py's worker arguments, with the replica on the pod's loopback and the
    repository at the pod's path, plus the startup window."""
    values = chart.merge_values(chart.default_values(), chart.load_values([CLUSTER]))
    worker = containers(cluster)["dynamo-worker"]
    spec = ClusterSpec(repository=Path(values["storage"]["mountPath"]) / values["storage"]["repositoryDir"],
                       model_name=values["openai"]["modelName"], host="127.0.0.1",
                       base_port=values["triton"]["ports"]["grpc"] - 1)
    topology = list(spec.worker(0).command)
    assert topology[1:3] == ["-m", "cluster.worker"]
    argv = worker["command"] + worker["args"]
    assert argv[0] == "python"  # the Dynamo image's CPython 3.11 (docker/dynamo.Dockerfile)
    ready = str(values["dynamo"]["worker"]["readyTimeoutSeconds"])
    assert argv[1:] == topology[1:] + ["--ready-timeout", ready]
    assert argv[argv.index("--replica") + 1] == f"127.0.0.1:{names.DEFAULT_GRPC_PORT}"
    assert argv[argv.index("--endpoint") + 1] == ENDPOINT
    probe = values["probes"]["startup"]
    assert int(ready) >= probe["periodSeconds"] * probe["failureThreshold"]  # it waits as long as Triton may load


@pytest.mark.parametrize("mode", list(RouterMode))
def test_the_frontends_command_is_the_topologys(mode):
    objects = render({"dynamo": {"enabled": True, "routerMode": mode.value, "migrationLimit": 5}})
    frontend = containers(objects, f"{FULL}-frontend")["frontend"]
    spec = ClusterSpec(repository=Path("/models/repository"), model_name="llama", host="0.0.0.0",
                       frontend_port=9000, router_mode=mode, migration_limit=5)
    expected = list(spec.frontend().command[1:])
    expected[expected.index("--discovery-backend") + 1] = "kubernetes"  # no shared directory between pods
    assert frontend["command"][1:] + frontend["args"] == expected
    assert ("--no-router-kv-events" in frontend["args"]) == (mode == RouterMode.KV)
    assert frontend["args"][frontend["args"].index("--namespace") + 1] == NAMESPACE


def test_dynamo_processes_get_the_topologys_environment_for_a_pod(cluster):
    """Every variable cluster/topology.py sets, but the file-discovery directory and PYTHONPATH (in
    the image): kubernetes discovery, the same planes, the addresses on the pod's IP."""
    topology = dict(ClusterSpec(repository=Path("/r"), model_name="m").dynamo_environment())
    worker = env(containers(cluster)["dynamo-worker"])
    frontend = env(containers(cluster, f"{FULL}-frontend")["frontend"])
    for variables in (worker, frontend):
        assert set(topology) - {"DYN_FILE_KV", "PYTHONPATH"} <= set(variables)
        assert variables["DYN_DISCOVERY_BACKEND"] == "kubernetes"
        for same in ("DYN_REQUEST_PLANE", "DYN_EVENT_PLANE", "HF_HUB_OFFLINE"):
            assert variables[same] == topology[same]
        for host in ("DYN_TCP_RPC_HOST", "DYN_TCP_RESPONSE_STREAM_HOST", "DYN_EVENT_PLANE_HOST", "DYN_SYSTEM_HOST"):
            assert variables[host] == {"fieldRef": {"fieldPath": "status.podIP"}}
        for identity, field in (("POD_NAME", "metadata.name"), ("POD_UID", "metadata.uid"),
                                ("POD_NAMESPACE", "metadata.namespace")):
            assert variables[identity] == {"fieldRef": {"fieldPath": field}}
        assert variables["HOME"].startswith("/tmp") and variables["XDG_CACHE_HOME"].startswith("/tmp")
    # the fixed ports the NetworkPolicies name
    assert worker["DYN_TCP_RPC_PORT"] == "9110" and worker["DYN_SYSTEM_PORT"] == "9090"
    assert frontend["DYN_TCP_RESPONSE_STREAM_PORT"] == "9111"
    assert frontend["DYN_DISABLE_FRONTEND_ADMIN_API"] == "1"


def test_kubernetes_discovery_finds_the_ready_triton_pods(cluster):
    pod = triton_pod(cluster)
    assert DISCOVERY_LABELS.items() <= pod["metadata"]["labels"].items()
    # the EndpointSlices Dynamo watches: a Service's labels are its slices' labels
    workers = named(cluster, "Service", f"{FULL}-workers")
    assert DISCOVERY_LABELS.items() <= workers["metadata"]["labels"].items()
    assert workers["spec"]["clusterIP"] == "None"
    assert workers["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    frontend_pod = named(cluster, "Deployment", f"{FULL}-frontend")["spec"]["template"]
    assert DISCOVERY_LABELS.items() <= frontend_pod["metadata"]["labels"].items()
    # neither pod is selected by the other's Deployment or Services
    assert not _matches({"matchLabels": TRITON_PODS}, frontend_pod["metadata"]["labels"])
    assert not _matches({"matchLabels": FRONTEND_PODS}, pod["metadata"]["labels"])


def test_discovery_rbac_is_the_operators_role_bound_to_both_pods(cluster):
    role = named(cluster, "Role", f"{FULL}-dynamo-discovery")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    assert rules == {
        (("",), ("endpoints", "pods")): {"get", "list", "watch"},
        (("discovery.k8s.io",), ("endpointslices",)): {"get", "list", "watch"},
        (("nvidia.com",), ("dynamoworkermetadatas",)): {"create", "get", "list", "watch", "update", "patch", "delete"},
    }
    binding = named(cluster, "RoleBinding", f"{FULL}-dynamo-discovery")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    triton_sa = triton_pod(cluster)["spec"]["serviceAccountName"]
    frontend_sa = named(cluster, "Deployment", f"{FULL}-frontend")["spec"]["template"]["spec"]["serviceAccountName"]
    assert {s["name"] for s in binding["subjects"]} == {triton_sa, frontend_sa}
    assert {s["namespace"] for s in binding["subjects"]} == {"default"}
    named(cluster, "ServiceAccount", frontend_sa)


def test_only_the_worker_container_holds_an_api_token(cluster):
    pod = triton_pod(cluster)["spec"]
    assert pod["automountServiceAccountToken"] is False
    token = next(v for v in pod["volumes"] if v["name"] == "dynamo-api-access")
    assert {"serviceAccountToken"} <= {k for s in token["projected"]["sources"] for k in s}
    mounted = {c["name"] for c in pod["containers"] for m in c["volumeMounts"] if m["name"] == "dynamo-api-access"}
    assert mounted == {"dynamo-worker"}
    worker = containers(cluster)["dynamo-worker"]
    mount = next(m for m in worker["volumeMounts"] if m["name"] == "dynamo-api-access")
    assert mount == {"name": "dynamo-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                     "readOnly": True}
    # the worker reads the repository (and the engine's tokenizer) at Triton's paths
    models = next(m for m in worker["volumeMounts"] if m["name"] == "models")
    triton_models = next(m for m in containers(cluster)["triton"]["volumeMounts"] if m["name"] == "models")
    assert models == triton_models and models["readOnly"] is True
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_worker_metadata_crd_is_upstreams_and_optional(cluster):
    [crd] = kinds(cluster, "CustomResourceDefinition")
    assert crd["metadata"]["name"] == "dynamoworkermetadatas.nvidia.com"
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    [version] = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert not kinds(render({"dynamo": {"enabled": True}}), "CustomResourceDefinition")


def test_services_stay_inside_the_cluster(cluster):
    for name in (FULL, f"{FULL}-frontend", f"{FULL}-metrics"):
        assert named(cluster, "Service", name)["spec"]["type"] == "ClusterIP"
    assert {p["port"] for p in named(cluster, "Service", f"{FULL}-frontend")["spec"]["ports"]} == {9000}


def test_in_the_cluster_only_the_named_peers_reach_each_port(cluster):
    values = chart.load_values([CLUSTER])
    clients = values["networkPolicy"]["tritonClients"]
    scrapers = chart.default_values()["networkPolicy"]["metricsScrapers"]
    frontend = [_pod_peer(FRONTEND_PODS)]
    # Triton: HTTP/gRPC to the named clients only (the worker is in the pod: loopback)
    assert allowed_peers(cluster, TRITON_PODS, names.DEFAULT_HTTP_PORT) == clients
    assert allowed_peers(cluster, TRITON_PODS, names.DEFAULT_GRPC_PORT) == clients
    assert allowed_peers(cluster, TRITON_PODS, names.DEFAULT_METRICS_PORT) == scrapers
    # the worker's request plane and system server: Dynamo's frontend only
    assert allowed_peers(cluster, TRITON_PODS, 9110) == frontend
    assert allowed_peers(cluster, TRITON_PODS, 9090) == frontend
    assert allowed_peers(cluster, TRITON_PODS, 9000) == []  # no OpenAI front container here
    # the frontend: its API to the named clients (and the scrapers: /metrics is on it), the
    # response streams from the workers only
    assert allowed_peers(cluster, FRONTEND_PODS, 9000) == values["networkPolicy"]["frontendClients"] + scrapers
    assert allowed_peers(cluster, FRONTEND_PODS, 9111) == [_pod_peer(TRITON_PODS)]
    assert allowed_peers(cluster, FRONTEND_PODS, names.DEFAULT_GRPC_PORT) == []


def test_the_frontends_api_is_open_unless_its_clients_are_named():
    objects = render({"dynamo": {"enabled": True}})
    assert allowed_peers(objects, FRONTEND_PODS, 9000) == ANY
    assert allowed_peers(objects, TRITON_PODS, names.DEFAULT_HTTP_PORT) == []


@pytest.mark.parametrize("values, message", [
    ({"dynamo": {"enabled": True, "kvEvents": True}}, "no engine of this kit publishes KV-cache events"),
    ({"dynamo": {"enabled": True}, "inferenceGateway": {"enabled": True}},
     "inferenceGateway.enabled and dynamo.enabled"),
    ({"dynamo": {"enabled": True}, "service": {"type": "LoadBalancer"}}, "service.type must stay ClusterIP"),
    ({"dynamo": {"enabled": True, "worker": {"requestPlanePort": 8001}}}, "is one of Triton's ports"),
    ({"dynamo": {"enabled": True, "worker": {"systemPort": 9110}}}, "must differ"),
])
def test_inconsistent_dynamo_values_fail_with_a_message(values, message):
    with pytest.raises(chart.ChartError, match=message):
        render(values)


def test_the_kv_events_refusal_is_the_topologys():
    with pytest.raises(ValueError, match="no engine of this repository publishes KV-cache events"):
        ClusterSpec(repository=Path("/r"), model_name="m", kv_events=True).validate()
    assert chart.default_values()["dynamo"]["kvEvents"] is False


@pytest.mark.parametrize("values", [
    {"dynamo": {"enabled": True, "routerMode": "power-of-two"}},  # Dynamo has it; the kit's topology does not
    {"dynamo": {"enable": True}},  # typo
    {"dynamo": {"migrationLimit": -1}},
    {"dynamo": {"worker": {"requestPlanePort": "9110"}}},
    {"networkPolicy": {"tritonClients": [{"pods": {}}]}},
    {"networkPolicy": {"tritonClients": [{}]}},
    {"networkPolicy": {"enable": False}},
])
def test_values_schema_rejects_dynamo_and_policy_mistakes(values):
    with pytest.raises(chart.ChartError):
        render(values)


def test_the_router_modes_are_the_topologys():
    import json

    schema = json.loads((chart.CHART_DIR / "values.schema.json").read_text())
    assert schema["properties"]["dynamo"]["properties"]["routerMode"]["enum"] == [m.value for m in RouterMode]
    topology = ClusterSpec(repository=Path("/r"), model_name="m")
    assert chart.default_values()["dynamo"]["routerMode"] == topology.router_mode.value
    assert chart.default_values()["dynamo"]["migrationLimit"] == topology.migration_limit
