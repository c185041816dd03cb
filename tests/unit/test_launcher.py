import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from serving.cli import _run_until_done_or_stopped, main
from serving.launch_record import LaunchRecord, RecordError
from serving.launcher import ServerSettings, server_command, server_env
from serving.ports import free_loopback_port
from serving.stop_signals import StopSignals
from serving.triton_install import TritonInstall


def test_command_binds_loopback_and_disables_model_control():
    install = TritonInstall(root=Path("/srv/triton"), lib_dir=Path("/libs"))
    cmd = server_command(ServerSettings(repository=Path("/repo"), grpc_port=9001), install)
    assert cmd[0] == "/srv/triton/bin/tritonserver"
    for flag in ("--http-address=127.0.0.1", "--grpc-address=127.0.0.1", "--metrics-address=127.0.0.1",
                 "--grpc-port=9001", "--model-control-mode=none", "--backend-directory=/srv/triton/backends",
                 "--exit-timeout-secs=30", "--strict-readiness=true"):
        assert flag in cmd
    restricted = [a for a in cmd if a.startswith(("--http-restricted-api=", "--grpc-restricted-protocol="))]
    assert len(restricted) == 2
    for flag in restricted:
        apis, key = flag.split("=", 1)[1].split(":")
        assert set(apis.split(",")) == {"model-repository", "shared-memory", "trace", "logging"}
        assert key.startswith("triton-admin-key=") and len(key) > len("triton-admin-key=") + 16  # random, locked


def test_admin_key_is_used_and_not_shown():
    settings = ServerSettings(repository=Path("/repo"), admin_key="s3cret-key")
    assert "s3cret-key" not in repr(settings)
    cmd = server_command(settings, TritonInstall(Path("/t"), Path("/l")))
    assert sum("triton-admin-key=s3cret-key" in a for a in cmd) == 2


def test_env_puts_this_interpreter_first_on_path():
    env = server_env(TritonInstall(Path("/t"), Path("/libs")), {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/x"})
    assert env["PATH"].split(":")[0] == str(Path(sys.prefix) / "bin")
    assert env["LD_LIBRARY_PATH"] == "/libs:/x"


def test_run_refuses_a_taken_port_within_seconds_naming_it_and_its_holder(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        start = time.monotonic()
        result = CliRunner().invoke(main, ["run", "--repository", str(tmp_path), "--grpc-port", str(port),
                                           "--http-port", str(free_loopback_port()),
                                           "--metrics-port", str(free_loopback_port()), "--", "true"])
    assert result.exit_code == 1 and time.monotonic() - start < 5
    assert f"port {port} (gRPC, --grpc-port) on 127.0.0.1 is already in use by pid {os.getpid()}" in result.output
    assert "make stop" in result.output


def test_run_refuses_a_taken_openai_port(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        result = CliRunner().invoke(main, ["up", "--repository", str(tmp_path), "--openai-port", str(port),
                                           "--http-port", str(free_loopback_port()), "--grpc-port",
                                           str(free_loopback_port()), "--metrics-port", str(free_loopback_port())])
    assert result.exit_code == 1 and f"port {port} (OpenAI, --openai-port)" in result.output


def test_run_exits_with_the_command_status():
    with StopSignals() as signals:
        assert _run_until_done_or_stopped(["sh", "-c", "exit 3"], signals, grace_s=5) == 3
        assert _run_until_done_or_stopped(["sh", "-c", "kill -9 $$"], signals, grace_s=5) == 128 + 9


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_is_passed_to_the_command_and_sets_the_status(sig, tmp_path):
    """In a child process of its own: a signal sent to the test runner itself would meet every
    native thread the session has started (gRPC, OpenVINO, torch) - it once crashed pytest."""
    marker, ready = tmp_path / "got", tmp_path / "ready"
    script = f"trap 'echo {int(sig)} > {marker}; exit 0' {sig.name[3:]}; touch {ready}; sleep 30 & wait"
    launcher = subprocess.Popen([sys.executable, "-c", (
        "import sys\n"
        "from serving.cli import _run_until_done_or_stopped\n"
        "from serving.stop_signals import StopSignals\n"
        "with StopSignals() as signals:\n"
        f"    sys.exit(_run_until_done_or_stopped(['sh', '-c', {script!r}], signals, grace_s=5))\n")])
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    start = time.monotonic()
    launcher.send_signal(sig)
    assert launcher.wait(15) == 128 + sig
    assert time.monotonic() - start < 5 and marker.read_text().strip() == str(int(sig))


def test_launch_record_round_trip_and_legacy_pid_file(tmp_path):
    path = tmp_path / "tritonserver.pid"
    LaunchRecord(10, 11, 1234.5, ready=True).write(path)
    assert LaunchRecord.read(path) == LaunchRecord(10, 11, 1234.5, True)
    path.write_text("4242\n")
    assert LaunchRecord.read(path) == LaunchRecord(4242)
    path.write_text("{not json")
    with pytest.raises(RecordError, match="is not a launch record"):
        LaunchRecord.read(path)
