"""A multi-replica deployment on one host, as data: N Triton replicas on their own ports, a Dynamo
worker each, and Dynamo's frontend (OpenAI HTTP, router, migration); the commands and the
environment of each process.  Nothing here starts anything (cluster/launcher.py does)."""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from pathlib import Path

from cluster.dynamo_names import ENDPOINT, NAMESPACE
from cluster.keeper import ProcessSpec
from contract import names

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FRONTEND_PORT = 9000  # the OpenAI API's port, as `make serve` gives it
DEFAULT_BASE_PORT = 8100  # replica i: HTTP base + 10i, gRPC + 1, metrics + 2


class RouterMode(str, enum.Enum):
    """Dynamo's --router-mode choices the kit offers (dynamo.frontend 1.6.1 --help)."""

    KV = "kv"  # by KV-cache overlap and load
    ROUND_ROBIN = "round-robin"
    LEAST_LOADED = "least-loaded"
    RANDOM = "random"


@dataclass(frozen=True)
class ReplicaPorts:
    http: int
    grpc: int
    metrics: int

    @classmethod
    def of(cls, base_port: int, replica: int) -> "ReplicaPorts":
        """Replica i of a cluster whose ports start at `base_port`: HTTP base + 10i, gRPC + 1, metrics + 2."""
        base = base_port + 10 * replica
        return cls(base, base + 1, base + 2)


@dataclass(frozen=True)
class ClusterSpec:
    repository: Path  # every replica serves this rendered repository
    model_name: str  # what clients send (the checkpoint's name)
    replicas: int = 2
    router_mode: RouterMode = RouterMode.KV
    # Dynamo's router learns the replicas' caches from KV events where an engine publishes them;
    # the CPU engine cannot (OpenVINO GenAI 2026.4.1 reports no cache events), so the router
    # predicts each replica's cache from its own routing decisions (--no-router-kv-events).
    kv_events: bool = False
    migration_limit: int = 3  # times a request moves to another worker when its worker dies mid-stream
    host: str = names.DEFAULT_HOST
    frontend_port: int = DEFAULT_FRONTEND_PORT
    base_port: int = DEFAULT_BASE_PORT
    state_dir: Path = Path("build/cluster")  # discovery files, logs, Dynamo's cache
    dynamo_python: Path = Path("build/dynamo/bin/python")  # requirements/dynamo.lock
    kit_python: Path = Path(sys.executable)  # the project's venv: Triton's models take its packages
    exit_timeout_s: int = 30  # a replica's in-flight requests get this long on shutdown

    def validate(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"'replicas' must be >= 1, got {self.replicas}")
        if self.migration_limit < 0:
            raise ValueError(f"'migration_limit' must be >= 0, got {self.migration_limit}")
        if self.kv_events:
            raise ValueError(
                "'kv_events': no engine of this repository publishes KV-cache events; "
                "the router runs in its approximate mode (docs/cluster.md)"
            )

    def ports(self, replica: int) -> ReplicaPorts:
        return ReplicaPorts.of(self.base_port, replica)

    @property
    def frontend_url(self) -> str:
        return f"http://{self.host}:{self.frontend_port}"

    def dynamo_environment(self) -> tuple[tuple[str, str], ...]:
        """Dynamo without etcd or NATS: file discovery in state_dir, TCP requests, ZMQ events, every
        address it advertises on `host`, its model cache inside state_dir, nothing from a hub."""
        state = self.state_dir.resolve()
        return (
            ("DYN_DISCOVERY_BACKEND", "file"),
            ("DYN_FILE_KV", str(state / "discovery")),
            ("DYN_REQUEST_PLANE", "tcp"),
            ("DYN_EVENT_PLANE", "zmq"),
            ("DYN_TCP_RPC_HOST", self.host),
            ("DYN_TCP_RESPONSE_STREAM_HOST", self.host),
            ("DYN_EVENT_PLANE_HOST", self.host),
            ("DYN_SYSTEM_HOST", self.host),
            ("XDG_CACHE_HOME", str(state / "cache")),
            ("HF_HUB_OFFLINE", "1"),
            ("PYTHONPATH", str(ROOT)),
        )

    def frontend(self, name: str = "frontend") -> ProcessSpec:
        """Dynamo's frontend; another `name` (and port, router mode) for a second one beside it,
        which discovers the same workers (a benchmark compares router modes so)."""
        command = [
            str(self.dynamo_python),
            "-m",
            "dynamo.frontend",
            "--http-host",
            self.host,
            "--http-port",
            str(self.frontend_port),
            "--namespace",
            NAMESPACE,
            "--router-mode",
            self.router_mode.value,
            "--discovery-backend",
            "file",
            "--request-plane",
            "tcp",
            "--event-plane",
            "zmq",
            "--migration-limit",
            str(self.migration_limit),
        ]
        if self.router_mode == RouterMode.KV and not self.kv_events:
            command.append("--no-router-kv-events")
        return ProcessSpec(name, tuple(command), self.state_dir / "logs" / f"{name}.log", self.dynamo_environment())

    def replica(self, index: int) -> ProcessSpec:
        """One tritonserver under `serving up` (its own supervisor: restarts, canary), no OpenAI front."""
        p = self.ports(index)
        log_dir = self.state_dir / "logs" / f"replica-{index}"
        command = (
            str(self.kit_python),
            "-m",
            "serving",
            "up",
            "--repository",
            str(self.repository),
            "--host",
            self.host,
            "--http-port",
            str(p.http),
            "--grpc-port",
            str(p.grpc),
            "--metrics-port",
            str(p.metrics),
            "--log-file",
            str(log_dir / "tritonserver.log"),
            "--exit-timeout",
            str(self.exit_timeout_s),
            "--openai-port",
            "0",
        )
        return ProcessSpec(
            f"replica-{index}", command, log_dir / "launcher.log", stop_timeout_s=self.exit_timeout_s + 15.0
        )

    def worker(self, index: int) -> ProcessSpec:
        command = (
            str(self.dynamo_python),
            "-m",
            "cluster.worker",
            "--replica",
            f"{self.host}:{self.ports(index).grpc}",
            "--repository",
            str(self.repository.resolve()),
            "--model-name",
            self.model_name,
            "--endpoint",
            ENDPOINT,
        )
        return ProcessSpec(
            f"worker-{index}",
            command,
            self.state_dir / "logs" / f"replica-{index}" / "worker.log",
            self.dynamo_environment(),
            stop_timeout_s=self.exit_timeout_s + 5.0,
        )
