"""A wedged model never looks healthy: Triton keeps a stub that stops answering "ready" (its
health endpoints answer 200 throughout), so the launcher's canary (serving/canary.py) sends a
one-token request through every entry, marks the server not ready at the first entry that
gives no answer in time, and restarts it when one fails `--canary-failures` times in a row;
the clients in flight get a clear error, none waits past its deadline.  The chart's probes run
the same canary (`python -m serving canary`): the commands the chart renders are run here
against the same wedged server.

The wedge is real: the stub's process is stopped (SIGSTOP), so nothing of ours runs in it:
what a deadlocked BLS stub (the Python backend's lock-order inversion) or a stuck engine step
looks like from outside."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import httpx
import psutil
import pytest

from client import ChatMessage, LlmClient, SamplingParams
from client.errors import ClientError, RequestTimeout, ServerUnavailable
from contract import names
from deploy import chart
from serving import prometheus
from serving.launch_record import LaunchRecord
from serving.launcher import free_loopback_port
from serving.stubs import stubs_of
from tests.integration.conftest import ROOT

pytestmark = [pytest.mark.server, pytest.mark.slow]

# A deadline of 4 s failed a healthy server's canary (ensemble and BLS, top priority, behind the three
# in-flight streams) in a clean-clone CI run on a loaded 2-core host; 6 s keeps the wedge seen in ~20 s.
PERIOD_S, DEADLINE_S, FAILURES = 2.0, 6.0, 2
CLIENT_DEADLINE_S = 120.0
LONG = SamplingParams(max_tokens=400, min_tokens=400, temperature=0.0)


def stub_of(server_pid: int, model: str) -> psutil.Process:
    return psutil.Process(next(pid for pid, stub in stubs_of(server_pid).items() if stub.model.startswith(model)))


@pytest.fixture
def supervised(repository, tmp_path):
    """`serving up` with the OpenAI front and a fast canary, recording its readiness."""
    ports = {name: free_loopback_port() for name in ("http", "grpc", "metrics", "openai")}
    record = tmp_path / "launch.json"
    cmd = [sys.executable, "-m", "serving", "up", "--repository", str(repository), "--exit-timeout", "5",
           "--http-port", str(ports["http"]), "--grpc-port", str(ports["grpc"]), "--metrics-port", str(ports["metrics"]),
           "--openai-port", str(ports["openai"]), "--log-file", str(tmp_path / "tritonserver.log"),
           "--record-file", str(record), "--canary-period", str(PERIOD_S), "--canary-deadline", str(DEADLINE_S),
           "--canary-deadline-unprioritized", str(DEADLINE_S), "--canary-failures", str(FAILURES),
           "--openai-log-format", "json"]
    log = tmp_path / "launcher.log"
    proc = subprocess.Popen(cmd, stdout=open(log, "wb"), stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 300
    while not (record.exists() and LaunchRecord.read(record).ready and "Triton is serving" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.5)
    yield proc, ports, record, log
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(90)
    except subprocess.TimeoutExpired:
        proc.kill()


def in_flight(grpc_url: str, model: str, outcomes: list, started: threading.Event) -> None:
    """A long streamed answer; its outcome: completed, or the error that ended it, and when."""
    t0 = time.monotonic()
    try:
        with LlmClient(grpc_url, model=model) as client:
            for _ in client.stream([ChatMessage("user", "Write a very long story.")], LONG, timeout_s=CLIENT_DEADLINE_S):
                started.set()
        outcomes.append((model, "completed", time.monotonic() - t0))
    except ClientError as e:
        outcomes.append((model, type(e).__name__, time.monotonic() - t0))


def openai_in_flight(port: int, events: list, started: threading.Event) -> None:
    model = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["data"][0]["id"]
    body = {"model": model, "prompt": "Write a very long story.", "max_tokens": 400, "stream": True,
            "temperature": 0, "min_tokens": 400}
    try:
        with httpx.stream("POST", f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=CLIENT_DEADLINE_S) as r:
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    events.append(json.loads(line[6:]))
                    started.set()
    except httpx.HTTPError as e:
        events.append({"transport_error": str(e)})


def test_a_wedged_bls_stub_makes_the_server_not_ready_then_restarted_and_clients_get_a_clear_error(supervised):
    proc, ports, record, log = supervised
    grpc_url, http = f"127.0.0.1:{ports['grpc']}", f"http://127.0.0.1:{ports['http']}"
    server_pid = LaunchRecord.read(record).server_pid
    outcomes, events, threads, started = [], [], [], []
    for model in (names.LLM_BLS, names.LLM_BLS, names.ENSEMBLE):
        started.append(threading.Event())
        threads.append(threading.Thread(target=in_flight, args=(grpc_url, model, outcomes, started[-1])))
    started.append(threading.Event())
    threads.append(threading.Thread(target=openai_in_flight, args=(ports["openai"], events, started[-1])))
    for thread in threads:
        thread.start()
    assert all(event.wait(60) for event in started)  # every answer is under way

    probes = [chart_probe(p, ports) for p in ("readinessProbe", "livenessProbe")]
    for command in probes:
        passed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert passed.returncode == 0, passed.stdout + passed.stderr

    stub = stub_of(server_pid, names.LLM_BLS)
    stub.send_signal(signal.SIGSTOP)
    wedged_at = time.monotonic()
    # Triton itself still says the model is ready; the chart's probe commands fail in time
    assert urllib.request.urlopen(f"{http}/v2/models/{names.LLM_BLS}/ready", timeout=5).status == 200
    failed = subprocess.run(probes[0], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1 and f"{names.LLM_BLS}: FAILED" in failed.stdout, failed.stdout + failed.stderr
    assert time.monotonic() - wedged_at < DEADLINE_S + 15

    not_ready_after = ready_again_after = None
    while time.monotonic() - wedged_at < 180 and ready_again_after is None:
        now = LaunchRecord.read(record)
        if not_ready_after is None and not now.ready:
            not_ready_after = time.monotonic() - wedged_at
        if not_ready_after is not None and now.ready and now.server_pid != server_pid:
            ready_again_after = time.monotonic() - wedged_at
        time.sleep(0.2)
    text = log.read_text()
    assert not_ready_after is not None and not_ready_after <= PERIOD_S + DEADLINE_S + 5, text
    assert ready_again_after is not None, text
    assert "wedged: tensorrt_llm_bls gave no answer" in text and "restarting tritonserver" in text
    print(f"wedge -> not ready {not_ready_after:.1f}s, -> serving again {ready_again_after:.1f}s")

    for thread in threads:
        thread.join(CLIENT_DEADLINE_S)
    # every client in flight ended: its answer, or a clear UNAVAILABLE; none waited to its deadline
    assert len(outcomes) == 3
    for model, outcome, seconds in outcomes:
        assert outcome in ("completed", ServerUnavailable.__name__), outcomes
        assert seconds < CLIENT_DEADLINE_S and outcome != RequestTimeout.__name__
    assert any(outcome == ServerUnavailable.__name__ for model, outcome, _ in outcomes if model == names.LLM_BLS)
    # the OpenAI stream ends with an error event, or finished; never a 'stop' after an error
    errors = [i for i, e in enumerate(events) if "error" in e or "transport_error" in e]
    finishes = [i for i, e in enumerate(events) if any(c.get("finish_reason") for c in e.get("choices", ()))]
    assert errors or finishes, events
    assert not (errors and finishes and finishes[-1] > errors[0]), events
    # `--openai-log-format json` reaches the front `up` starts: its access line, one JSON object, names the request
    front_log = (log.parent / "openai_front.log").read_text()
    access = [json.loads(line) for line in front_log.splitlines() if '"openai_front.access"' in line]
    assert any(a["request_id"].startswith("req-") and "/v1/completions" in a["message"] for a in access), front_log

    assert subprocess.run(probes[1], cwd=ROOT, capture_output=True, timeout=60).returncode == 0  # live again
    # the new server serves (a client reconnects within its 2 s backoff: client/aio_client.py
    # CHANNEL_ARGS), and counts the wedge and the restart
    with LlmClient(grpc_url, model=names.LLM_BLS) as client:
        for attempt in range(5):
            try:
                assert client.generate([ChatMessage("user", "Say hi.")], SamplingParams(max_tokens=4)).text
                break
            except ServerUnavailable:
                time.sleep(1)
        else:
            pytest.fail("the restarted server does not answer")
    samples = prometheus.scrape(f"http://127.0.0.1:{ports['metrics']}/metrics")
    assert prometheus.value(samples, "kit_server_restarts_total", reason="wedged") == 1
    assert prometheus.value(samples, "kit_wedges_total", entry=names.LLM_BLS) == 1


def chart_probe(probe: str, ports: dict[str, int]) -> list[str]:
    """The chart's probe command (Triton's container), pointed at this machine's ports."""
    values = {"canary": {"deadlineSeconds": int(DEADLINE_S), "unprioritizedDeadlineSeconds": int(DEADLINE_S)}}
    documents = [d for r in chart.render(chart.merge_values(chart.default_values(), values)) for d in r.documents]
    container = next(d for d in documents if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    command = container[probe]["exec"]["command"]
    assert command[:4] == ["python3", "-m", "serving", "canary"]
    return [sys.executable, *command[1:4], *(a.replace(f":{names.DEFAULT_GRPC_PORT}", f":{ports['grpc']}")
                                             for a in command[4:])]
