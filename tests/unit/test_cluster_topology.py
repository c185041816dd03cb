"""The one-host topology (cluster/topology.py) and the process keeper (cluster/keeper.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cluster.keeper import Keeper, ProcessSpec
from cluster.topology import ClusterSpec, RouterMode
from serving.supervisor import GaveUp, RestartPolicy


def spec(**kwargs) -> ClusterSpec:
    return ClusterSpec(repository=Path("build/repository"), model_name="m", state_dir=Path("/tmp/c"), **kwargs)


def option(command, name):
    return command[command.index(name) + 1]


def test_each_replica_has_its_own_ports_and_the_worker_talks_to_its_own():
    s = spec(replicas=3, base_port=8100)
    assert [(s.ports(i).http, s.ports(i).grpc, s.ports(i).metrics) for i in range(3)] == \
        [(8100, 8101, 8102), (8110, 8111, 8112), (8120, 8121, 8122)]
    replica, worker = s.replica(2).command, s.worker(2).command
    assert option(replica, "--grpc-port") == "8121" and option(replica, "--openai-port") == "0"
    assert option(worker, "--replica") == "127.0.0.1:8121"
    assert option(worker, "--endpoint") == "kit.triton.generate"


def test_everything_binds_and_advertises_loopback_and_needs_no_etcd_nats_or_hub():
    env = dict(spec().dynamo_environment())
    assert env["DYN_DISCOVERY_BACKEND"] == "file" and env["DYN_REQUEST_PLANE"] == "tcp"
    assert env["DYN_EVENT_PLANE"] == "zmq" and env["HF_HUB_OFFLINE"] == "1"
    for name in ("DYN_TCP_RPC_HOST", "DYN_TCP_RESPONSE_STREAM_HOST", "DYN_EVENT_PLANE_HOST", "DYN_SYSTEM_HOST"):
        assert env[name] == "127.0.0.1", name
    assert env["DYN_FILE_KV"] == "/tmp/c/discovery" and env["XDG_CACHE_HOME"] == "/tmp/c/cache"
    frontend = spec().frontend().command
    assert option(frontend, "--http-host") == "127.0.0.1" and option(frontend, "--discovery-backend") == "file"


def test_kv_routing_without_engine_events_runs_the_routers_approximate_mode():
    assert "--no-router-kv-events" in spec(router_mode=RouterMode.KV).frontend().command
    round_robin = spec(router_mode=RouterMode.ROUND_ROBIN).frontend().command
    assert option(round_robin, "--router-mode") == "round-robin" and "--no-router-kv-events" not in round_robin
    assert option(spec(migration_limit=5).frontend().command, "--migration-limit") == "5"


@pytest.mark.parametrize("kwargs, field", [({"replicas": 0}, "replicas"), ({"migration_limit": -1}, "migration_limit"),
                                           ({"kv_events": True}, "kv_events")])
def test_a_bad_spec_fails_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        spec(**kwargs).validate()


def _keeper(tmp_path, code: str, policy=RestartPolicy(max_restarts=2, window_s=60.0)) -> tuple[Keeper, list[str]]:
    said: list[str] = []
    process = ProcessSpec("child", (sys.executable, "-c", code), tmp_path / "child.log", (("KIT_X", "1"),),
                          stop_timeout_s=5.0)
    return Keeper(process, policy, said.append), said


def test_a_process_that_exits_is_restarted_within_its_budget(tmp_path):
    keeper, said = _keeper(tmp_path, "import os, sys; print(os.environ['KIT_X']); sys.exit(7)")
    keeper.start()
    keeper.process.wait()
    keeper.check()
    keeper.process.wait()
    keeper.check()
    keeper.process.wait()
    with pytest.raises(GaveUp, match="child exited"):
        keeper.check()
    assert keeper.restarts == 2 and said[0] == "child exited (7): restarting it (restart 1)"
    assert (tmp_path / "child.log").read_text().split() == ["1", "1", "1"]


def test_stop_ends_the_process_and_what_it_started(tmp_path):
    keeper, _ = _keeper(tmp_path, "import subprocess, sys, time; "
                                  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                                  "time.sleep(60)")
    keeper.start()
    import time
    time.sleep(0.5)
    import psutil
    children = psutil.Process(keeper.pid).children()
    assert children
    assert keeper.stop() is not None
    keeper.check()  # stopped on purpose: not restarted
    assert not keeper.alive()
    gone, alive = psutil.wait_procs(children, timeout=5)
    assert not alive


def test_a_worker_refuses_an_engine_model_that_is_not_decoupled(tmp_path):
    """The worker streams every request: a repository rendered non-decoupled fails at load, naming
    the setting (and one with no engine model names the ones it looks for)."""
    from cluster.replica_model import ReplicaModel, ReplicaModelError

    with pytest.raises(ReplicaModelError, match="openvino_llm"):
        ReplicaModel.read(tmp_path, "m")
    (tmp_path / "openvino_llm").mkdir()
    (tmp_path / "openvino_llm" / "config.pbtxt").write_text(
        'name: "openvino_llm"\nmodel_transaction_policy { decoupled: false }\n')
    with pytest.raises(ReplicaModelError, match="model_transaction_policy.decoupled"):
        ReplicaModel.read(tmp_path, "m")
