"""The launcher owns its server: a signal to `serving run` leaves nothing behind, taken ports
are refused at once, readiness is never borrowed from another server, and `serving down`
reaps the stubs of a server that died with its launcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from serving import launcher
from serving.launcher import ServerFailed, ServerSettings, TritonServer
from serving.ports import ensure_free, free_loopback_port
from serving.stubs import parse_stub_command
from tests.integration.conftest import ROOT

pytestmark = [pytest.mark.server, pytest.mark.slow]
START_S = 240  # a server start on a busy 2-core host


def port_args() -> list[str]:
    return ["--http-port", str(free_loopback_port()), "--grpc-port", str(free_loopback_port()),
            "--metrics-port", str(free_loopback_port())]


def wait_for(text: str, path: Path, proc: subprocess.Popen, timeout_s: float = START_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.is_file() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"no {text!r} in {path}:\n{path.read_text(errors='replace') if path.is_file() else ''}")


def gone(pid: int, timeout_s: float = 10) -> bool:
    try:
        psutil.Process(pid).wait(timeout_s)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    return True


def stubs_of(server_pid: int) -> list[int]:
    """Stubs anywhere on the machine that name this server as their parent."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        stub = parse_stub_command(p.info["cmdline"] or [])
        if stub and stub.parent_pid == server_pid and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p.info["pid"])
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_to_serving_run_leaves_no_server_and_no_stub(repository, tmp_path, sig):
    out, ports = tmp_path / "run.out", port_args()
    cmd = [sys.executable, "-m", "serving", "run", "--repository", str(repository), "--exit-timeout", "10",
           "--log-file", str(tmp_path / "tritonserver.log"), *ports, "--", "sleep", "600"]
    with open(out, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        wait_for("Triton is serving", out, proc)
        children = psutil.Process(proc.pid).children()
        server = next(p.pid for p in children if p.name() == "tritonserver")
        sleeper = next(p.pid for p in children if p.name() == "sleep")
        stubs = stubs_of(server)
        assert stubs, "the server runs Python-backend stubs"
        proc.send_signal(sig)
        assert proc.wait(60) == 128 + sig, out.read_text()
        for pid in [server, sleeper, *stubs]:
            assert gone(pid), f"pid {pid} outlived `serving run` after {sig.name}"
        assert stubs_of(server) == []
        ensure_free("127.0.0.1", ServerSettings(Path("."), http_port=int(ports[1]), grpc_port=int(ports[3]),
                                                metrics_port=int(ports[5])).named_ports())
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_second_server_on_taken_ports_fails_within_seconds_naming_port_and_holder(server, tmp_path):
    s = server.settings
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "serving", "run", "--repository", str(s.repository),
                             "--http-port", str(s.http_port), "--grpc-port", str(s.grpc_port),
                             "--metrics-port", str(s.metrics_port), "--log-file", str(tmp_path / "second.log"),
                             "--", "echo", "SHOULD-NOT-RUN"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert result.returncode == 1 and time.monotonic() - start < 15
    assert "SHOULD-NOT-RUN" not in result.stdout + result.stderr
    for name, option, port in [("HTTP", "--http-port", s.http_port), ("gRPC", "--grpc-port", s.grpc_port),
                               ("metrics", "--metrics-port", s.metrics_port)]:
        assert f"port {port} ({name}, {option}) on 127.0.0.1 is already in use by pid {server.process.pid}" in result.stderr
    assert "make stop" in result.stderr
    assert not (tmp_path / "second.log").exists()  # nothing was started


def test_readiness_is_never_borrowed_from_another_server_on_the_port(server, tmp_path, monkeypatch):
    """The race the port check cannot close: another server takes the port after the check.
    Our tritonserver fails to bind; the other one answers ready all along; we must fail."""
    monkeypatch.setattr(launcher.ports, "ensure_free", lambda host, ports: None)
    s = server.settings
    second = TritonServer(ServerSettings(s.repository, http_port=s.http_port, grpc_port=s.grpc_port,
                                         metrics_port=s.metrics_port, log_file=tmp_path / "second.log",
                                         server_dir=s.server_dir, exit_timeout_s=5))
    assert second.is_ready()  # the probe reaches the first server
    second.start()
    try:
        with pytest.raises(ServerFailed) as failed:
            second.wait_ready(START_S)
        assert f"tritonserver (pid {second.process.pid}) failed to start" in str(failed.value)
        assert "already in use" in str(failed.value)
    finally:
        second.stop(drain=False)
    assert stubs_of(second.process.pid) == []
    assert server.is_running() and server.is_ready()


def test_down_reaps_the_stubs_of_a_server_killed_with_its_launcher(repository, tmp_path):
    """cwd is tmp_path: the record (build/tritonserver.pid) must not meet a user's own."""
    result = subprocess.run([sys.executable, "-m", "serving", "up", "--detach", "--repository", str(repository),
                             "--log-file", str(tmp_path / "tritonserver.log"), *port_args()],
                            capture_output=True, text=True, cwd=tmp_path, timeout=START_S + 60)
    assert result.returncode == 0, result.stderr
    record = json.loads((tmp_path / "build" / "tritonserver.pid").read_text())
    assert record["ready"] is True
    launcher_pid, server_pid = record["launcher_pid"], record["server_pid"]
    assert stubs_of(server_pid)
    os.kill(launcher_pid, signal.SIGSTOP)  # so it cannot restart or reap: the worst case for `down`
    os.kill(server_pid, signal.SIGKILL)
    os.kill(launcher_pid, signal.SIGKILL)
    assert gone(server_pid) and gone(launcher_pid)
    down = subprocess.run([sys.executable, "-m", "serving", "down"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert down.returncode == 0, down.stderr
    assert f"launcher pid {launcher_pid} is not running" in down.stdout and "stopped" in down.stdout
    assert stubs_of(server_pid) == []
    assert not (tmp_path / "build" / "tritonserver.pid").exists()
