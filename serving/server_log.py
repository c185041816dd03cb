"""What our own tritonserver's log says about its network services.

Readiness must never be borrowed from another server that answers on the same port, so the
launcher believes only lines that (1) were appended to the log after it started the server
(the file may be shared and is opened for appending) and (2) carry the server's own pid as
their thread id: Triton 2.51 starts its endpoints and reports their failures from the main
thread, whose id is the process id (glog prefix `Lmmdd hh:mm:ss.us TID file:line] msg`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path


class Service(enum.Enum):
    HTTP = "HTTPService"
    GRPC = "GRPCInferenceService"
    METRICS = "Metrics Service"


GLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(?P<tid>\d+) \S+:\d+\]\s*(?P<message>.*)$")
STARTED = re.compile(r"^Started (?P<service>.+?) at (?P<address>\S*):(?P<port>\d+)$")
# A service that could not start; Triton then exits (--exit-on-error), but possibly after a
# while, and meanwhile another server may answer on the port.
FAILED = ("failed to start", "already in use")


@dataclass(frozen=True)
class Started:
    service: Service
    port: int


@dataclass(frozen=True)
class Failed:
    line: str


def parse_line(line: str, pid: int) -> Started | Failed | None:
    """The event a log line reports for the server with this pid, if any."""
    match = GLOG_LINE.match(line.strip())
    if not match or int(match["tid"]) != pid:
        return None
    message = match["message"].strip().strip('"').strip()
    started = STARTED.match(message)
    if started:
        try:
            return Started(Service(started["service"]), int(started["port"]))
        except ValueError:  # a service we do not wait for
            return None
    if any(marker in message for marker in FAILED):
        return Failed(line.strip())
    return None


@dataclass
class Readiness:
    """What the log has said so far, against the ports the server was told to use."""

    ports: dict[Service, int]
    started: set[Service] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)

    def add(self, event: Started | Failed | None) -> None:
        if isinstance(event, Failed):
            self.failures.append(event.line)
        elif isinstance(event, Started):
            if self.ports.get(event.service) == event.port:
                self.started.add(event.service)
            else:
                self.failures.append(
                    f"{event.service.value} started on port {event.port}, not on {self.ports.get(event.service)}"
                )

    @property
    def services_started(self) -> bool:
        return self.started == set(self.ports)

    def waiting_for(self) -> str:
        return ", ".join(f"'Started {s.value} at ...:{p}'" for s, p in self.ports.items() if s not in self.started)


class ServerLog:
    """Reads the lines appended to `path` after `offset`, as they come."""

    def __init__(self, path: Path, offset: int, pid: int, ports: dict[Service, int]) -> None:
        self.path = path
        self.pid = pid
        self.readiness = Readiness(ports)
        self._offset = offset
        self._partial = b""

    def poll(self) -> Readiness:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return self.readiness
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            self.readiness.add(parse_line(line.decode(errors="replace"), self.pid))
        return self.readiness
