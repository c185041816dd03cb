"""What the chart's objects mean: GPUs from the engine, Triton's flags, probes, draining,
exposure, secrets, Prometheus and the autoscaler wiring (HPA + prometheus-adapter, or KEDA)."""

from __future__ import annotations

import base64
import re

import pytest
import yaml

from contract.security import ADMIN_APIS, ADMIN_KEY_HEADER

from contract import names
from deploy import chart

TP2 = chart.CI_VALUES_DIR / "tp2-hpa-servicemonitor-values.yaml"


def render(values=None, files=()):
    rendered = chart.render(chart.merge_values(chart.load_values(list(files)), values or {}))
    return [d for r in rendered for d in r.documents]


def one(objects, kind, suffix=""):
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"{kind}*{suffix}: {[o['metadata']['name'] for o in found]}"
    return found[0]


def triton(objects):
    return one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]


@pytest.fixture(scope="module")
def default():
    return render()


@pytest.fixture(scope="module")
def tp2():
    return render(files=[TP2])


def test_value_defaults_are_the_contract_names():
    values = chart.default_values()
    assert values["triton"]["ports"] == {"http": names.DEFAULT_HTTP_PORT, "grpc": names.DEFAULT_GRPC_PORT,
                                         "metrics": names.DEFAULT_METRICS_PORT}
    assert values["models"] == {"ensemble": names.ENSEMBLE, "engine": names.TRTLLM_ENGINE}


def test_default_image_is_the_ngc_trtllm_image(default):
    assert triton(default)["image"] == "nvcr.io/nvidia/tritonserver:25.12-trtllm-python-py3"


@pytest.mark.parametrize("tp, pp", [(1, 1), (2, 1), (4, 2), (1, 4)])
def test_gpus_and_mpi_ranks_follow_the_engine(tp, pp):
    container = triton(render({"engine": {"tensorParallelSize": tp, "pipelineParallelSize": pp}}))
    world = tp * pp
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(world)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["WORLD_SIZE"], env["TP_SIZE"], env["PP_SIZE"]) == (str(world), str(tp), str(pp))
    if world == 1:
        assert container["command"] == ["tritonserver"]
        return
    assert container["command"] == ["mpirun"]
    ranks = " ".join(container["args"]).split(" : ")
    assert len(ranks) == world
    assert all(r.startswith("-n 1 tritonserver ") for r in ranks)
    assert "--model-control-mode=none" in ranks[0]
    for rank, text in enumerate(ranks):
        assert f"--backend-config=python,shm-region-prefix-name=prefix{rank}_" in text
        if rank:  # ranks > 0 load the engine model only
            assert f"--load-model={names.TRTLLM_ENGINE}" in text and "--model-control-mode=explicit" in text


def test_a_launcher_command_gets_rank_zero_flags():
    container = triton(render(files=[chart.CI_VALUES_DIR / "launcher-engine-build-values.yaml"]))
    assert container["command"][:3] == ["python3", "-m", "serving"]
    assert container["args"][0].startswith("--model-repository=") and ":" not in container["args"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_gpu_count_cannot_be_overridden_by_resources():
    container = triton(render({"resources": {"limits": {"nvidia.com/gpu": 7}}}))
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_triton_serves_the_volume_with_admin_apis_locked(default):
    args = triton(default)["args"]
    assert "--model-repository=/models/repository" in args
    assert "--model-control-mode=none" in args
    assert [f"--{p}-port={port}" for p, port in (("http", 8000), ("grpc", 8001), ("metrics", 8002))] == \
        [a for a in args if a.split("=")[0] in ("--http-port", "--grpc-port", "--metrics-port")]
    http = next(a for a in args if a.startswith("--http-restricted-api="))
    grpc = next(a for a in args if a.startswith("--grpc-restricted-protocol="))
    for flag in (http, grpc):
        apis, key = flag.split("=", 1)[1].split(":")
        assert apis.split(",") == list(ADMIN_APIS)  # the launcher's list, one source
        assert not {"health", "inference", "metadata"} & set(apis.split(","))
        assert key == f"{ADMIN_KEY_HEADER}=$(TRITON_ADMIN_KEY)"


def test_secrets_reach_the_pod_only_by_reference(default, tp2):
    secret = one(default, "Secret", "-admin")
    key = base64.b64decode(secret["data"]["admin-key"]).decode()
    assert len(key) >= 32
    for objects in (default, tp2):
        pod = one(objects, "Deployment")["spec"]["template"]["spec"]
        env = {e["name"]: e for c in pod["containers"] + pod.get("initContainers", []) for e in c["env"]}
        assert env["TRITON_ADMIN_KEY"]["valueFrom"]["secretKeyRef"]["key"]
        assert not [n for n, e in env.items() if "value" in e and any(s in n for s in ("KEY", "TOKEN", "PASSWORD"))]
    openai_key = base64.b64decode(one(default, "Secret", "-openai")["data"]["api-key"]).decode()
    assert len(openai_key) >= 32 and openai_key != key
    everything_but_the_secret = yaml.safe_dump([o for o in default if o["kind"] != "Secret"])
    assert key not in everything_but_the_secret and openai_key not in everything_but_the_secret
    assert not [o for o in tp2 if o["kind"] == "Secret"]  # an existing Secret is used, none made


def openai_container(objects):
    containers = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "openai")


def test_openai_front_runs_beside_triton_on_its_loopback(default, tp2):
    for objects in (default, tp2):
        front = openai_container(objects)
        assert front["command"] == ["python3", "-m", "openai_front", "serve"]
        assert f"--grpc-url=127.0.0.1:{triton(objects)['ports'][1]['containerPort']}" in front["args"]
        assert front["readinessProbe"]["exec"]["command"][:4] == ["python3", "-m", "serving", "canary"]
        assert f"--openai-url=http://127.0.0.1:{names_port()}" in front["readinessProbe"]["exec"]["command"]
        assert front["livenessProbe"]["httpGet"] == {"path": "/live", "port": "openai"}
        assert front["securityContext"]["readOnlyRootFilesystem"] is True
        key = next(e for e in front["env"] if e["name"] == "OPENAI_FRONT_API_KEY")["valueFrom"]["secretKeyRef"]
        assert key["key"] == "api-key"
    assert one(default, "Secret", "-openai")["metadata"]["name"] == next(
        e for e in openai_container(default)["env"] if e["name"] == "OPENAI_FRONT_API_KEY")["valueFrom"]["secretKeyRef"]["name"]
    assert openai_container(tp2)["env"][-1]["valueFrom"]["secretKeyRef"]["name"] == "openai-api-key"
    client_ports = {p["name"]: p for p in one(default, "Service", "llama-triton")["spec"]["ports"]}
    assert client_ports["openai"]["port"] == names_port() and client_ports["openai"]["targetPort"] == "openai"


def names_port():
    from openai_front.cli import DEFAULT_PORT

    assert chart.default_values()["openai"]["port"] == DEFAULT_PORT
    return DEFAULT_PORT


def test_openai_front_metrics_are_scraped(tp2):
    metrics_ports = {p["name"] for p in one(tp2, "Service", "-metrics")["spec"]["ports"]}
    assert metrics_ports == {"metrics", "openai-metrics"}
    endpoints = {e["port"]: e for e in one(tp2, "ServiceMonitor", "llama-triton")["spec"]["endpoints"]}
    assert endpoints["openai-metrics"]["path"] == "/metrics"
    assert {"targetLabel": "job", "replacement": "openai-front"} in endpoints["openai-metrics"]["relabelings"]


def test_openai_front_can_be_left_out():
    objects = render({"openai": {"enabled": False}})
    assert [c["name"] for c in one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]] == ["triton"]
    assert not [o for o in objects if o["metadata"]["name"].endswith("-openai")]
    assert "openai" not in {p["name"] for p in one(objects, "Service", "llama-triton")["spec"]["ports"]}


def test_probes_run_the_canary_through_every_entry(default):
    """A wedged model still reports ready to /v2/health/*: readiness and liveness send a request
    (serving/canary.py), with probe timeouts above the canary's deadlines."""
    container = triton(default)
    assert container["startupProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    canary = chart.default_values()["canary"]
    for probe in (container["readinessProbe"], container["livenessProbe"]):
        command = probe["exec"]["command"]
        assert command[:4] == ["python3", "-m", "serving", "canary"]
        assert f"--grpc-url=127.0.0.1:{names.DEFAULT_GRPC_PORT}" in command
        assert probe["timeoutSeconds"] > canary["unprioritizedDeadlineSeconds"] >= canary["deadlineSeconds"]
    assert container["livenessProbe"]["failureThreshold"] > container["readinessProbe"]["failureThreshold"]
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 15 * 60  # engine load takes minutes


def test_without_the_canary_the_probes_ask_the_health_endpoints():
    container = triton(render({"canary": {"enabled": False}}))
    assert container["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}


def test_a_probe_timeout_below_the_canary_deadline_is_refused():
    with pytest.raises(Exception, match="probes.liveness.timeoutSeconds \\(30\\) must exceed the canary's deadline"):
        render({"probes": {"liveness": {"timeoutSeconds": 30}}})


def test_shutdown_drains_in_flight_requests(default):
    pod = one(default, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    exit_timeout = int(next(a for a in container["args"] if a.startswith("--exit-timeout-secs=")).split("=")[1])
    sleep = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert sleep > 0 and pod["terminationGracePeriodSeconds"] > sleep + exit_timeout


def test_mpi_waits_for_the_drain_before_killing_ranks(tp2):
    container = triton(tp2)
    env = {e["name"]: e.get("value") for e in container["env"]}
    exit_timeout = int(next(a for a in container["args"] if a.startswith("--exit-timeout-secs=")).split("=")[1])
    assert int(env["OMPI_MCA_odls_base_sigkill_timeout"]) >= exit_timeout


def test_pod_hardening(default):
    pod = one(default, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["automountServiceAccountToken"] is False
    ctx = pod["containers"][0]["securityContext"]
    assert ctx["capabilities"]["drop"] == ["ALL"] and ctx["readOnlyRootFilesystem"]
    assert ctx["allowPrivilegeEscalation"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts["/dev/shm"]["name"] == "shm" and mounts["/tmp"]["name"] == "tmp"
    assert mounts["/models"]["readOnly"] is True


def test_services_expose_only_what_is_needed(default):
    clients = one(default, "Service", "triton")
    assert {p["name"]: p["port"] for p in clients["spec"]["ports"]} == {"http": 8000, "grpc": 8001, "openai": 9000}
    assert clients["spec"]["type"] == "ClusterIP"
    metrics = one(default, "Service", "-metrics")
    assert {p["name"]: p["port"] for p in metrics["spec"]["ports"]} == {"metrics": 8002, "openai-metrics": 9000}
    assert metrics["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert metrics["metadata"]["annotations"]["prometheus.io/port"] == "8002"
    ports = {p["name"] for p in triton(default)["ports"]}
    assert ports == {"http", "grpc", "metrics"}


def test_dcgm_servicemonitor_selects_the_gpu_operators_exporter(tp2):
    dcgm = one(tp2, "ServiceMonitor", "-dcgm")["spec"]
    assert dcgm["selector"]["matchLabels"] == {"app": "nvidia-dcgm-exporter"}
    assert dcgm["namespaceSelector"]["matchNames"] == ["gpu-operator"]
    assert dcgm["endpoints"][0]["port"] == "gpu-metrics"


def test_servicemonitor_selects_the_metrics_service_only(tp2):
    monitor = one(tp2, "ServiceMonitor", "llama-triton")
    selector = monitor["spec"]["selector"]["matchLabels"]
    selected = [s["metadata"]["name"] for s in tp2 if s["kind"] == "Service"
                and selector.items() <= s["metadata"]["labels"].items()]
    assert selected == [one(tp2, "Service", "-metrics")["metadata"]["name"]]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_prometheusrule_carries_the_generated_slo_alerts(tp2):
    from deploy import alerts

    rule = one(tp2, "PrometheusRule")
    assert rule["spec"] == alerts.rules_document()
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # the job the alerts select is the job the ServiceMonitor gives its targets
    relabel = one(tp2, "ServiceMonitor", "llama-triton")["spec"]["endpoints"][0]["relabelings"]
    assert {"targetLabel": "job", "replacement": alerts.SCRAPE_JOB} in relabel


def test_compose_prometheus_loads_the_same_rules_file():
    from pathlib import Path

    from deploy import alerts

    root = Path(chart.CHART_DIR).parents[2]
    compose = yaml.safe_load((root / "docker-compose.yml").read_text())
    mounts = compose["services"]["prometheus"]["volumes"]
    source = alerts.RULES_FILE.relative_to(root)
    mount = next(m for m in mounts if m.startswith(f"./{source}:"))
    prometheus = yaml.safe_load((root / "docker" / "prometheus.yml").read_text())
    target = mount.split(":")[1]
    assert any(Path(target).match(g) for g in prometheus["rule_files"])
    assert [j["job_name"] for j in prometheus["scrape_configs"]][0] == alerts.SCRAPE_JOB


def test_hpa_scales_the_deployment_on_a_metric_the_adapter_defines(tp2):
    hpa = one(tp2, "HorizontalPodAutoscaler")
    deployment = one(tp2, "Deployment")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                            "name": deployment["metadata"]["name"]}
    assert "replicas" not in deployment["spec"]  # the HPA owns the count
    rules = yaml.safe_load(one(tp2, "ConfigMap", "-adapter-rules")["data"]["config.yaml"])["rules"]
    defined = {r["name"]["as"] for r in rules}
    assert defined == {"triton_waiting_requests", "triton_pending_requests", "triton_queue_time_us_per_request"}
    metric = hpa["spec"]["metrics"][0]
    assert metric["type"] == "Pods" and metric["pods"]["metric"]["name"] in defined
    assert chart.default_values()["autoscaling"]["metric"] in defined
    for rule in rules:
        assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}
        assert "<<.LabelMatchers>>" in rule["metricsQuery"] and "<<.GroupBy>>" in rule["metricsQuery"]
    waiting = next(r for r in rules if r["name"]["as"] == "triton_waiting_requests")
    assert f'model="{names.TRTLLM_ENGINE}"' in waiting["metricsQuery"]


KEDA = chart.CI_VALUES_DIR / "keda-values.yaml"


def test_keda_scales_the_deployment_on_the_queue_from_prometheus():
    from deploy import alerts

    values = chart.load_values([KEDA])
    objects = [d for r in chart.render(values, release="chat", namespace="llm") for d in r.documents]
    scaled = one(objects, "ScaledObject")
    deployment = one(objects, "Deployment")
    assert not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]  # KEDA makes its own
    assert "replicas" not in deployment["spec"]  # KEDA's HPA owns the count
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                      "name": deployment["metadata"]["name"]}
    keda = values["autoscaling"]["keda"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 8)  # autoscaling.min/maxReplicas
    assert (spec["pollingInterval"], spec["cooldownPeriod"]) == (keda["pollingInterval"], 300)
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"] == \
        chart.default_values()["autoscaling"]["behavior"]
    [trigger] = spec["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "AverageValue"
    metadata = trigger["metadata"]
    assert metadata["serverAddress"] == keda["serverAddress"] and metadata["threshold"] == "6"
    # the series the adapter's triton_waiting_requests and the alerts read, this release's pods only
    query = metadata["query"]
    series, matcher = alerts.TRTLLM_WAITING.rstrip("}").split("{")
    assert query.startswith(f"sum({series}{{") and matcher in query
    assert f'model="{names.TRTLLM_ENGINE}"' in query and 'namespace="llm"' in query
    pods = re.search(r'pod=~"([^"]+)"', query).group(1)
    name = deployment["metadata"]["name"]
    assert re.fullmatch(pods, f"{name}-5d8f7c9b6d-x2k4q")  # a Deployment pod: <name>-<hash>-<suffix>
    assert not re.fullmatch(pods, f"{name}-epp-7f9c6d5b4-abcde")  # the endpoint picker's


def test_keda_query_and_threshold_are_values():
    # the query is rendered with tpl; unset optional fields are left to KEDA's defaults
    query = 'sum(nv_inference_pending_request_count{namespace="{{ .Release.Namespace }}"})'
    values = {"autoscaling": {"enabled": True, "behavior": None,
                              "keda": {"enabled": True, "threshold": 2.5, "cooldownPeriod": None, "query": query}}}
    scaled = one(render(values), "ScaledObject")["spec"]
    metadata = scaled["triggers"][0]["metadata"]
    assert metadata["query"] == 'sum(nv_inference_pending_request_count{namespace="default"})'
    assert metadata["threshold"] == "2.5"
    assert "cooldownPeriod" not in scaled and "advanced" not in scaled


def test_optional_objects_are_off_by_default(default):
    kinds = {o["kind"] for o in default}
    assert not kinds & {"HorizontalPodAutoscaler", "ServiceMonitor", "ConfigMap", "PrometheusRule", "ScaledObject"}
    assert {"Deployment", "Service", "PodDisruptionBudget", "PersistentVolumeClaim"} <= kinds
    assert one(default, "PersistentVolumeClaim")["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
