"""Starts, watches, scales and stops a multi-replica deployment on one host (cluster/topology.py):
every process under a Keeper (restarted when it exits), replicas added and removed while it
serves, and everything stopped in order - workers first (out of discovery, in-flight requests
finish), then the frontend, then the replicas (they drain)."""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from cluster.dynamo_names import ENDPOINT
from cluster.keeper import Keeper
from cluster.topology import ClusterSpec, ReplicaPorts
from contract import names
from serving import ports
from serving.supervisor import GaveUp, RestartPolicy

_NAMESPACE, _COMPONENT, _ENDPOINT = ENDPOINT.split(".")
# A replica that dies keeps being restarted: its worker exits with it (cluster/worker.py).
RESTARTS = RestartPolicy(max_restarts=20, window_s=600.0)


class ClusterFailed(RuntimeError):
    pass


@dataclass
class Replica:
    index: int
    server: Keeper  # `serving up` on the replica's ports
    worker: Keeper


def get_json(url: str, timeout_s: float = 2.0) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None


def model_listed(frontend_url: str, model: str) -> bool:
    """The frontend at `frontend_url` lists `model` (a worker of it has registered)."""
    models = get_json(f"{frontend_url}/v1/models") or {}
    return any(m.get("id") == model for m in models.get("data", []))


def replica_ports(base_port: int, index: int) -> list[ports.NamedPort]:
    p = ReplicaPorts.of(base_port, index)
    return [
        ports.NamedPort(f"replica {index} {name}", "--base-port", port)
        for name, port in (("HTTP", p.http), ("gRPC", p.grpc), ("metrics", p.metrics))
    ]


def _ensure_free(host: str, wanted: list[ports.NamedPort]) -> None:
    try:
        ports.ensure_free(host, wanted)
    except ports.PortUnavailable as e:
        raise ClusterFailed(str(e)) from None


def free_base_port(replicas: int, host: str = names.DEFAULT_HOST, tries: int = 50) -> int:
    """A base port whose first `replicas` replicas' ports are all free now, picked at random (for
    clusters started beside other servers: tests, benchmarks)."""
    rng = random.Random()
    for _ in range(tries):
        base = rng.randrange(20000, 40000, 10)
        try:
            ports.ensure_free(host, [p for i in range(replicas) for p in replica_ports(base, i)])
            return base
        except ports.PortUnavailable:
            continue
    raise ClusterFailed(f"no free block of ports for {replicas} replicas in {tries} tries")


class Cluster:
    def __init__(self, spec: ClusterSpec, report: Callable[[str], None] = print) -> None:
        spec.validate()
        self.spec = spec
        self._report = report
        self.frontend = Keeper(spec.frontend(), RESTARTS, report)
        self.replicas: dict[int, Replica] = {}
        self._lock = threading.Lock()
        self.failure: Exception | None = None  # what made the watcher give up
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    # --- the parts ----------------------------------------------------------------------
    def _start_replica(self, index: int) -> Replica:
        _ensure_free(self.spec.host, replica_ports(self.spec.base_port, index))
        replica = Replica(
            index,
            Keeper(self.spec.replica(index), RESTARTS, self._report),
            Keeper(self.spec.worker(index), RESTARTS, self._report),
        )
        replica.server.start()
        replica.worker.start()  # it waits for its replica to be ready, then registers
        with self._lock:
            self.replicas[index] = replica
        return replica

    def start(self) -> None:
        """Every process of the spec (not waiting for readiness: wait_ready)."""
        if not self.spec.dynamo_python.is_file():
            raise ClusterFailed(
                f"{self.spec.dynamo_python} is missing: make the Dynamo environment first "
                "(python -m cluster environment)"
            )
        _ensure_free(self.spec.host, [ports.NamedPort("frontend", "--port", self.spec.frontend_port)])
        # File discovery keeps an entry per instance; a killed run's entries would list workers
        # that are gone until their TTL ran out.
        shutil.rmtree(self.spec.state_dir / "discovery", ignore_errors=True)
        for index in range(self.spec.replicas):
            self._start_replica(index)
        self.frontend.start()
        self._watcher = threading.Thread(target=self._watch, name="cluster-watch", daemon=True)
        self._watcher.start()

    def add_replica(self) -> int:
        """One more replica and its worker; returns its index (its ports: spec.ports(index))."""
        with self._lock:
            index = next(i for i in range(len(self.replicas) + 1) if i not in self.replicas)
        self._start_replica(index)
        return index

    def remove_replica(self, index: int) -> None:
        """Its worker leaves discovery and lets its requests finish, then the replica drains."""
        with self._lock:
            replica = self.replicas.pop(index)
        replica.worker.stop()
        replica.server.stop()

    # --- state ---------------------------------------------------------------------------
    def instances(self) -> list[dict]:
        """The worker instances Dynamo's frontend routes to (its /health)."""
        health = get_json(f"{self.spec.frontend_url}/health") or {}
        return [
            i
            for i in health.get("instances", [])
            if (i.get("namespace"), i.get("component"), i.get("endpoint")) == (_NAMESPACE, _COMPONENT, _ENDPOINT)
        ]

    def model_listed(self) -> bool:
        return model_listed(self.spec.frontend_url, self.spec.model_name)

    def wait_ready(self, timeout_s: float = 600.0, instances: int | None = None) -> float:
        """Until the frontend lists the model and routes to `instances` workers (default: one per
        replica); seconds waited.  Raises ClusterFailed if a process gave up or time runs out."""
        wanted = len(self.replicas) if instances is None else instances
        start = time.monotonic()
        while not (self.model_listed() and len(self.instances()) == wanted):
            if self.failure is not None:
                raise ClusterFailed(str(self.failure))
            if time.monotonic() - start > timeout_s:
                raise ClusterFailed(
                    f"not ready after {timeout_s:.0f}s: {len(self.instances())} of {wanted} "
                    f"workers registered; logs in {self.spec.state_dir / 'logs'}"
                )
            time.sleep(0.25)
        return time.monotonic() - start

    def check(self) -> None:
        """Restart what exited (GaveUp past its restart budget)."""
        self.frontend.check()
        with self._lock:
            replicas = list(self.replicas.values())
        for replica in replicas:
            replica.server.check()
            replica.worker.check()

    def _watch(self, period_s: float = 1.0) -> None:
        """Every `period_s` until stop(): restart what exited; on GaveUp, record it and stop watching."""
        while not self._stopping.wait(period_s):
            try:
                self.check()
            except GaveUp as e:
                self.failure = e
                self._report(f"giving up: {e}")
                return

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join()
        with self._lock:
            replicas = list(self.replicas.values())
            self.replicas.clear()
        with ThreadPoolExecutor(max_workers=max(1, len(replicas))) as pool:
            list(pool.map(lambda r: r.worker.stop(), replicas))
            self.frontend.stop()
            list(pool.map(lambda r: r.server.stop(), replicas))

    def __enter__(self) -> "Cluster":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
