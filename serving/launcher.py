"""Start, watch and stop one tritonserver process, and own it.

The server runs in its own process group (its Python-backend stubs are its children), with
the interpreter's environment first on PATH: the stubs take their packages from the
`python3` on PATH, which must be this project's virtualenv (our code, OpenVINO, numpy<2).

Owning it means: its ports are free before it starts (else an error naming port and holder);
it is ready only when *its* log says its services started and it is still alive (a probe
could reach another server on the same port); and nothing of it outlives it (leftover stubs
are reaped; it gets SIGTERM if the launcher dies).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import psutil

from contract import names
from contract.security import restricted_api_flags
from contract.telemetry import TraceSettings
from serving import ports, stubs
from serving.launch_record import LaunchRecord
from serving.ports import free_loopback_port  # noqa: F401  (re-exported: tests and bench import it here)
from serving.server_log import ServerLog, Service
from serving.stop_signals import die_with_parent
from serving.trace_config import trace_args
from serving.triton_install import TritonInstall, prepare_install, server_dir

DEFAULT_SERVER_DIR = server_dir()
# What "in flight" means for drain(): Triton's queues, our engines' batches, TensorRT-LLM's.
IN_FLIGHT_METRICS: tuple[tuple[str, dict[str, str]], ...] = (
    ("nv_inference_pending_request_count", {}),
    ("llm_requests_running", {}),
    ("llm_requests_waiting", {}),
    ("nv_trt_llm_request_metrics", {"request_type": "active"}),
)


class ServerFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class ServerSettings:
    repository: Path
    host: str = names.DEFAULT_HOST  # loopback unless asked otherwise
    http_port: int = names.DEFAULT_HTTP_PORT
    grpc_port: int = names.DEFAULT_GRPC_PORT
    metrics_port: int = names.DEFAULT_METRICS_PORT
    log_file: Path = Path("build/logs/tritonserver.log")
    log_verbose: int = 0
    exit_timeout_s: int = 30  # on SIGTERM, in-flight requests get this long to finish
    ready_model: str = names.ENSEMBLE
    server_dir: Path = DEFAULT_SERVER_DIR
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    # Key of the admin APIs (model repository, shared memory, trace, logging).  None: a random
    # key nobody is told, which leaves them locked.  Never printed or logged.
    admin_key: str | None = field(default=None, repr=False)
    record_file: Path | None = None  # where a detached launcher records its server (LaunchRecord)
    # Variables added to the server's environment (its models' stubs inherit them), e.g. a test's
    # PYTHONPATH; the launcher's own environment is never changed.
    environment: tuple[tuple[str, str], ...] = ()
    # OpenTelemetry: Triton's own spans and our models' (serving/trace_config.py); None: off.
    trace: TraceSettings | None = None

    @classmethod
    def on_free_ports(cls, repository: Path, log_file: Path, **settings) -> "ServerSettings":
        return cls(
            repository=repository,
            http_port=free_loopback_port(),
            grpc_port=free_loopback_port(),
            metrics_port=free_loopback_port(),
            log_file=log_file,
            **settings,
        )

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def named_ports(self) -> list[ports.NamedPort]:
        return [
            ports.NamedPort("HTTP", "--http-port", self.http_port),
            ports.NamedPort("gRPC", "--grpc-port", self.grpc_port),
            ports.NamedPort("metrics", "--metrics-port", self.metrics_port),
        ]

    def service_ports(self) -> dict[Service, int]:
        return {Service.HTTP: self.http_port, Service.GRPC: self.grpc_port, Service.METRICS: self.metrics_port}


def server_command(settings: ServerSettings, install: TritonInstall) -> list[str]:
    return [
        str(install.binary),
        f"--model-repository={settings.repository.resolve()}",
        f"--backend-directory={install.backends}",
        f"--http-address={settings.host}",
        f"--http-port={settings.http_port}",
        f"--grpc-address={settings.host}",
        f"--grpc-port={settings.grpc_port}",
        f"--metrics-address={settings.host}",
        f"--metrics-port={settings.metrics_port}",
        "--allow-metrics=true",
        "--allow-gpu-metrics=false",
        "--model-control-mode=none",  # no load/unload API
        "--strict-readiness=true",
        "--exit-on-error=true",
        f"--exit-timeout-secs={settings.exit_timeout_s}",
        f"--log-verbose={settings.log_verbose}",
        *restricted_api_flags(settings.admin_key or secrets.token_urlsafe(24)),
        *trace_args(settings.trace),
        *settings.extra_args,
    ]


def server_env(install: TritonInstall, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PATH"] = f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    libs = (str(install.lib_dir), str(install.python_lib_dir or ""), env.get("LD_LIBRARY_PATH", ""))
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in libs if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _get(url: str, timeout: float = 2.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return 0


class TritonServer:
    """`stop`: set it (e.g. by a signal) to abandon waiting for readiness."""

    def __init__(
        self,
        settings: ServerSettings,
        stop: threading.Event | None = None,
        report: Callable[[str], None] = lambda message: print(message, file=sys.stderr),
    ) -> None:
        self.settings = settings
        self.process: subprocess.Popen | None = None
        self.identity: stubs.ServerIdentity | None = None
        self._stop = stop or threading.Event()
        self._report = report
        self._log: ServerLog | None = None
        self._shm_regions: set[str] = set()  # of every stub seen, unlinked once the server is gone

    def start(self) -> None:
        s = self.settings
        if not (s.repository / s.ready_model / "config.pbtxt").is_file():
            raise ServerFailed(f"{s.repository} has no {s.ready_model}/config.pbtxt: render the repository first")
        try:
            ports.ensure_free(s.host, s.named_ports())
        except ports.PortUnavailable as e:
            raise ServerFailed(str(e)) from None
        install = prepare_install(s.server_dir)
        s.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(s.log_file, "ab") as log:
            offset = log.seek(0, os.SEEK_END)  # what the log says before this is not about this server
            before = time.time()
            env = server_env(install) | (s.trace.environment() if s.trace else {}) | dict(s.environment)
            self.process = subprocess.Popen(
                die_with_parent(server_command(s, install)),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        try:
            self.identity = stubs.ServerIdentity.of(self.process.pid)
        except psutil.Error:  # it died at once; wait_ready says why
            self.identity = stubs.ServerIdentity(self.process.pid, before)
        self._log = ServerLog(s.log_file, offset, self.process.pid, s.service_ports())
        self._shm_regions.clear()
        self._record(ready=False)

    def set_ready(self, ready: bool) -> None:
        """Whether the server serves, as its supervisor judges (the canary): in the launch record."""
        self._record(ready)

    def _record(self, ready: bool) -> None:
        if self.settings.record_file and self.identity:
            LaunchRecord(os.getpid(), self.identity.pid, self.identity.created, ready).write(self.settings.record_file)

    @property
    def pid(self) -> int:
        """The tritonserver process's pid; the server must have been started."""
        if self.process is None:
            raise RuntimeError("tritonserver has not been started")
        return self.process.pid

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stub_pids(self) -> set[int]:
        """Pids of this server's Python-backend stubs."""
        if not self.is_running():
            return set()
        found = stubs.stubs_of(self.pid)
        self._shm_regions.update(stub.shm_region for stub in found.values())
        return set(found)

    def expected_stubs(self) -> int:
        """One stub per instance of every Python-backend model of the repository."""
        from build_engines.render import read_config

        total = 0
        for config_file in self.settings.repository.glob("*/config.pbtxt"):
            config = read_config(config_file)
            if config.backend == "python":
                total += sum(g.count or 1 for g in config.instance_group) or 1
        return total

    def is_ready(self) -> bool:
        """Whatever answers at these ports says it is ready: not necessarily this server (see wait_ready)."""
        s = self.settings
        return (
            _get(f"{s.http_url}/v2/health/ready") == 200
            and _get(f"{s.http_url}/v2/models/{s.ready_model}/ready") == 200
        )

    def wait_ready(self, timeout_s: float = 600.0) -> None:
        """Until this server is alive, its own log says its services started on its ports, and
        its model is ready.  Fails at once if it exits or logs that a service failed to start."""
        if self.process is None or self._log is None:
            raise ServerFailed("tritonserver was not started")
        pid, deadline = self.process.pid, time.monotonic() + timeout_s
        while True:
            if self._stop.is_set():
                raise ServerFailed(f"stopped before tritonserver (pid {pid}) was ready")
            readiness = self._log.poll()
            if readiness.failures:
                time.sleep(0.3)  # the rest of the story (gRPC's own line comes before Triton's)
                failures = "\n".join(self._log.poll().failures[-3:])
                raise ServerFailed(f"tritonserver (pid {pid}) failed to start:\n{failures}")
            if not self.is_running():
                raise ServerFailed(
                    f"tritonserver (pid {pid}) exited with status {self.process.returncode}; "
                    f"last log lines:\n{self.log_tail()}"
                )
            if readiness.services_started and self.is_ready():
                self.stub_pids()  # remember their shared-memory regions
                self._record(ready=True)
                return
            if time.monotonic() >= deadline:
                waiting = readiness.waiting_for() or f"model {self.settings.ready_model} ready"
                raise ServerFailed(
                    f"tritonserver (pid {pid}) was not ready after {timeout_s:.0f}s (waiting for "
                    f"{waiting} in {self.settings.log_file}); last log lines:\n{self.log_tail()}"
                )
            self._stop.wait(0.5)

    def in_flight(self) -> float:
        """Requests the server still works on: queued in Triton, or in an engine's batch."""
        from serving import prometheus

        try:
            samples = prometheus.scrape(self.settings.metrics_url, timeout_s=2)
        except OSError:
            return float("inf")  # unknown: keep waiting (up to the deadline)
        return sum(prometheus.value(samples, name, **labels) for name, labels in IN_FLIGHT_METRICS)

    def drain(self, deadline_s: float) -> bool:
        """Wait until nothing is in flight (True) or the deadline passes (False).  Triton's own
        SIGTERM handling closes the gRPC streams at once, cutting answers mid-stream, so the
        launcher lets them finish first."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline and self.is_running():
            if self.in_flight() == 0:
                time.sleep(0.3)  # gauges are published every 0.25 s: confirm
                if self.in_flight() == 0:
                    return True
            time.sleep(0.2)
        return False

    def stop(self, drain: bool = True) -> int | None:
        """Let in-flight requests finish (up to exit_timeout_s), then SIGTERM; SIGKILL if stuck.
        Then reap what the server left behind (stubs), however it ended."""
        if self.process is None:
            return None
        if drain and self.process.poll() is None:
            self.drain(self.settings.exit_timeout_s)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(self.settings.exit_timeout_s + 15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)  # alive: the group is still its own
                self.process.wait()
        self.reap_leftovers()
        return self.process.returncode

    def reap_leftovers(self) -> None:
        """Stubs (and anything else of its process group) that outlived the server."""
        if self.identity is None or self.is_running():
            return
        stubs.reap(stubs.find_leftovers(self.identity, until=time.time()), report=self._report)
        stubs.unlink_regions(self._shm_regions)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.settings.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def __enter__(self) -> "TritonServer":
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
