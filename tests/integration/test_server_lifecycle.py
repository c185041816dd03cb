"""The launcher under faults: SIGTERM drains in-flight requests; a killed Python-backend
stub is noticed and the server comes back; a killed server's stubs are reaped; the admin
APIs are locked by default."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import psutil
import pytest

from client import ChatMessage, LlmClient, SamplingParams
from serving.stubs import SHM_DIR, parse_stub_command
from serving.launcher import free_loopback_port
from tests.integration.conftest import ROOT

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture
def launched(repository, tmp_path):
    """`python -m serving up` in the foreground, as a user runs it."""
    ports = {"http": free_loopback_port(), "grpc": free_loopback_port(), "metrics": free_loopback_port()}
    log = tmp_path / "launcher.log"
    cmd = [sys.executable, "-m", "serving", "up", "--repository", str(repository), "--exit-timeout", "20",
           "--http-port", str(ports["http"]), "--grpc-port", str(ports["grpc"]), "--metrics-port", str(ports["metrics"]),
           "--log-file", str(tmp_path / "tritonserver.log")]
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{ports['http']}"
    assert wait_ready(url, proc, 240) and wait_banner(log, proc, 30), log.read_text()
    yield proc, url, f"127.0.0.1:{ports['grpc']}", log
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def wait_ready(url, proc, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if urllib.request.urlopen(url + "/v2/models/ensemble/ready", timeout=2).status == 200:
                return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    return False


def wait_banner(log, proc, timeout_s):
    """The launcher, not just the server, says it is ready (it has checked that the server is its own)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if "Triton is serving" in log.read_text(errors="replace"):
            return True
        time.sleep(0.3)
    return False


def test_sigterm_drains_the_request_in_flight(launched, tmp_path):
    proc, _, grpc_url, _ = launched
    result = {}

    def long_request():
        with LlmClient(grpc_url) as client:
            result["r"] = client.generate([ChatMessage("user", "Write a long story.")],
                                          SamplingParams(max_tokens=200, min_tokens=200, temperature=0))

    worker = threading.Thread(target=long_request)
    worker.start()
    time.sleep(1.5)  # mid-answer
    proc.send_signal(signal.SIGTERM)
    worker.join(60)
    assert result["r"].completion_tokens == 200 and result["r"].finish_reason == "length"
    assert proc.wait(60) == 0
    # no stub crashes on the way out (a metric family destroyed at the interpreter's exit did:
    # model_repository/triton/triton_metrics.py TritonMetricsPublisher.stop)
    assert "Segfault encountered" not in (tmp_path / "tritonserver.log").read_text(errors="replace")


def test_killed_stub_is_noticed_and_the_server_comes_back(launched):
    proc, url, grpc_url, log = launched
    server = next(p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "tritonserver")
    engine_stub = next(p for p in server.children(recursive=True) if "openvino_llm" in " ".join(p.cmdline()))
    engine_stub.kill()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and "ready again" not in log.read_text():
        time.sleep(0.5)
    assert "stub process(es)" in log.read_text() and "restarting tritonserver" in log.read_text()
    assert "tritonserver is ready again" in log.read_text()
    with LlmClient(grpc_url) as client:
        answer = client.generate([ChatMessage("user", "What is the capital of France?")],
                                 SamplingParams(max_tokens=10, temperature=0))
    assert "Paris" in answer.text


def test_stubs_of_a_killed_server_are_reaped(launched):
    """SIGKILL leaves tritonserver no chance to stop its stubs; some ignore SIGTERM and stay
    under pid 1 holding the model's memory.  The launcher reaps them before the restart."""
    proc, _, grpc_url, log = launched
    server = next(p for p in psutil.Process(proc.pid).children() if p.name() == "tritonserver")
    stubs = {p.pid: parse_stub_command(p.cmdline()) for p in server.children()}
    assert stubs and all(stubs.values())
    server.kill()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "ready again" not in log.read_text():
        time.sleep(0.5)
    assert "tritonserver exited: restarting" in log.read_text() and "tritonserver is ready again" in log.read_text()
    for pid in stubs:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
    assert not any((SHM_DIR / stub.shm_region).exists() for stub in stubs.values())
    with LlmClient(grpc_url) as client:
        answer = client.generate([ChatMessage("user", "What is the capital of France?")],
                                 SamplingParams(max_tokens=10, temperature=0))
    assert "Paris" in answer.text


def test_admin_apis_are_locked_by_default(launched):
    _, url, _, _ = launched
    request = urllib.request.Request(url + "/v2/repository/index", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(request, timeout=5)
    assert e.value.code == 403
    assert urllib.request.urlopen(url + "/v2/health/ready", timeout=5).status == 200
