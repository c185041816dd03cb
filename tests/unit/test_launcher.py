import sys
from pathlib import Path

from serving.launcher import ServerSettings, server_command, server_env
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
