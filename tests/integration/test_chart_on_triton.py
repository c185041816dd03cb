"""The chart against a real tritonserver: the flags it renders start Triton, the probes' health
endpoints answer while the admin APIs want the key (HTTP and gRPC), and the Prometheus
series its prometheus-adapter rules read exist on Triton's metrics endpoint."""

from __future__ import annotations

import re
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import yaml
from tritonclient.utils import InferenceServerException

from deploy import chart
from serving.launcher import free_loopback_port, server_env
from serving.triton_install import prepare_install, server_dir

pytestmark = pytest.mark.server

HEADER = "triton-admin-key"
GRPC_HEADER = f"triton-grpc-protocol-{HEADER}"  # Triton prefixes the key's gRPC metadata name
SERVER_DIR = server_dir(Path(__file__).resolve().parents[2] / "build")


def rendered(values=None):
    return [d for r in chart.render(values or {}) for d in r.documents]


def chart_args(repository, ports, key) -> list[str]:
    """The Deployment's Triton flags, pointed at this machine (repository, loopback ports)."""
    container = next(d for d in rendered() if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["tritonserver"]
    moved = {"--model-repository": str(repository), "--http-port": ports["http"], "--grpc-port": ports["grpc"],
             "--metrics-port": ports["metrics"]}
    args = []
    for arg in container["args"]:
        flag = arg.split("=", 1)[0]
        args.append(f"{flag}={moved[flag]}" if flag in moved else arg.replace("$(TRITON_ADMIN_KEY)", key))
    return args


@pytest.fixture(scope="module")
def chart_server(tmp_path_factory):
    """tritonserver started with the chart's flags on an empty repository (starts in seconds)."""
    repository = tmp_path_factory.mktemp("empty-repository")
    ports = {"http": free_loopback_port(), "grpc": free_loopback_port(), "metrics": free_loopback_port()}
    key = secrets.token_hex(16)
    install = prepare_install(SERVER_DIR)
    loopback = [f"--{s}-address=127.0.0.1" for s in ("http", "grpc", "metrics")]
    log_path = tmp_path_factory.mktemp("chart-logs") / "tritonserver.log"
    log = open(log_path, "wb")
    process = subprocess.Popen([str(install.binary), f"--backend-directory={install.backends}", *loopback,
                                *chart_args(repository, ports, key)],
                               stdout=log, stderr=subprocess.STDOUT, env=server_env(install), start_new_session=True)
    base = f"http://127.0.0.1:{ports['http']}"
    try:
        deadline = time.monotonic() + 60
        while status(f"{base}/v2/health/ready") != 200:
            assert process.poll() is None, f"tritonserver rejected the chart's flags; see {log.name}"
            assert time.monotonic() < deadline, "tritonserver did not become ready"
            time.sleep(0.3)
        yield base, f"127.0.0.1:{ports['grpc']}", key, log_path
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def status(url, method="GET", headers=None) -> int:
    request = urllib.request.Request(url, method=method, headers=headers or {}, data=b"{}" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def test_probe_endpoints_answer_without_a_key(chart_server):
    base, *_ = chart_server
    assert status(f"{base}/v2/health/ready") == 200
    assert status(f"{base}/v2/health/live") == 200


@pytest.mark.parametrize("path, method", [("/v2/repository/index", "POST"), ("/v2/logging", "GET"),
                                          ("/v2/trace/setting", "GET")])
def test_http_admin_apis_want_the_key(chart_server, path, method):
    base, _, key, _ = chart_server
    assert status(base + path, method) == 403
    assert status(base + path, method, {HEADER: "wrong"}) == 403
    assert status(base + path, method, {HEADER: key}) == 200


def test_grpc_admin_protocols_want_the_key(chart_server):
    _, url, key, _ = chart_server
    with grpcclient.InferenceServerClient(url) as client:
        assert client.is_server_ready()
        for headers in (None, {GRPC_HEADER: "wrong"}, {HEADER: key}):
            with pytest.raises(InferenceServerException, match="restricted"):
                client.get_model_repository_index(headers=headers)
        assert client.get_model_repository_index(headers={GRPC_HEADER: key}) is not None


def test_read_only_apis_that_clients_use_stay_open(chart_server):
    base, *_ = chart_server
    assert status(f"{base}/v2/models/stats") == 200  # perf_analyzer reads server-side statistics
    # The repository is empty: an open config API says "unknown model" (404); a restricted one 403.
    assert status(f"{base}/v2/models/ensemble/config") == 404


def test_model_control_is_off_even_with_the_key(chart_server):
    base, _, key, _ = chart_server
    assert status(f"{base}/v2/repository/models/anything/load", "POST", {HEADER: key}) >= 400


def test_the_admin_key_stays_out_of_the_log(chart_server):
    base, _, key, log_path = chart_server
    status(f"{base}/v2/models/stats", headers={HEADER: key})
    log = log_path.read_text()
    assert "MODE_NONE" in log and key not in log


def test_adapter_rules_read_series_triton_exports(server):
    """nv_inference_* series exist for the ensemble on a real server (nv_trt_llm_* come from the
    TensorRT-LLM backend, on GPU only)."""
    values = {"autoscaling": {"prometheusAdapterRules": {"enabled": True}}}
    configmap = next(d for d in rendered(values) if d["kind"] == "ConfigMap")
    queries = " ".join(r["seriesQuery"] + " " + r["metricsQuery"]
                       for r in yaml.safe_load(configmap["data"]["config.yaml"])["rules"])
    wanted = set(re.findall(r"\bnv_inference_[a-z_]+", queries))
    assert wanted >= {"nv_inference_pending_request_count", "nv_inference_queue_duration_us",
                      "nv_inference_request_success"}
    with urllib.request.urlopen(server.settings.metrics_url, timeout=5) as r:
        exported = r.read().decode()
    for name in sorted(wanted):
        assert re.search(rf'^{name}\{{[^}}]*model="ensemble"', exported, re.M), f"{name} not exported for the ensemble"
