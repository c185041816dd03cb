"""Refuse ports that are already taken, naming the port and, where the OS tells, its holder.

The test is a bind, like the server's own (SO_REUSEADDR, so a just-closed port in TIME_WAIT
counts as free).  The holder comes from /proc: the listening socket's inode in
/proc/net/tcp{,6}, then the process whose /proc/<pid>/fd links to `socket:[inode]`.  Another
user's processes cannot be read (that needs root); the message then says so.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from contract import names

PROC = Path("/proc")
TCP_LISTEN = "0A"  # st column of /proc/net/tcp
STOP_HINT = "`make stop` stops a server started with `make serve-detached`"
COMMAND_SHOWN = 300  # characters of a holder's command line in messages


class PortUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class NamedPort:
    name: str  # what listens there: "HTTP", "gRPC", ...
    option: str  # the command-line option that sets it
    port: int


@dataclass(frozen=True)
class ListeningSocket:
    address: str
    port: int
    inode: int


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str  # its command line ("?" when unreadable)


def _address(hex_address: str) -> str:
    """/proc/net/tcp prints an address as 32-bit words in host byte order."""
    words = [int(hex_address[i : i + 8], 16) for i in range(0, len(hex_address), 8)]
    raw = b"".join(struct.pack("=I", w) for w in words)
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


def parse_proc_net_tcp(text: str) -> list[ListeningSocket]:
    """The listening sockets of a /proc/net/tcp or /proc/net/tcp6 table."""
    sockets = []
    for line in text.splitlines()[1:]:  # the first line is the header
        fields = line.split()
        if len(fields) < 10 or fields[3] != TCP_LISTEN:
            continue
        hex_address, hex_port = fields[1].split(":")
        sockets.append(ListeningSocket(_address(hex_address), int(hex_port, 16), int(fields[9])))
    return sockets


def socket_inode(link: str) -> int | None:
    """The inode of an fd link `socket:[12345]`; None for anything else."""
    if link.startswith("socket:[") and link.endswith("]"):
        return int(link[len("socket:[") : -1])
    return None


def listening_sockets(port: int, proc: Path = PROC) -> list[ListeningSocket]:
    found = []
    for table in ("tcp", "tcp6"):
        try:
            found += [s for s in parse_proc_net_tcp((proc / "net" / table).read_text()) if s.port == port]
        except OSError:  # no IPv6, or no /proc: the holder stays unknown
            continue
    return found


def command_line(pid: int, proc: Path = PROC) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace") or "?"


def holders(inodes: Iterable[int], proc: Path = PROC) -> list[Holder]:
    """Processes (readable by us) with an fd on one of these sockets."""
    wanted = set(inodes)
    found: list[Holder] = []
    if not wanted:
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        if any(socket_inode(link) in wanted for link in _fd_links(entry / "fd")):
            found.append(Holder(int(entry.name), command_line(int(entry.name), proc)))
    return found


def _fd_links(fd_dir: Path) -> list[str]:
    try:
        fds = list(fd_dir.iterdir())
    except OSError:  # another user's process, or gone meanwhile
        return []
    links = []
    for fd in fds:
        try:
            links.append(os.readlink(fd))
        except OSError:  # closed meanwhile (the listing's own fd, for one)
            continue
    return links


def port_holders(port: int, proc: Path = PROC) -> list[Holder]:
    """Who listens on `port`, as far as this user can see."""
    return holders((s.inode for s in listening_sockets(port, proc)), proc)


def free_loopback_port() -> int:
    """A TCP port nothing listens on now (the kernel picks it), for servers started side by side."""
    with socket.socket() as s:
        s.bind((names.DEFAULT_HOST, 0))
        return s.getsockname()[1]


def bind_error(host: str, port: int) -> OSError | None:
    """None if a server could bind (host, port) now; the error otherwise."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        return e
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            return e
    return None


def ensure_free(host: str, ports: Sequence[NamedPort], proc: Path = PROC) -> None:
    """Raise PortUnavailable naming every port (of those not 0) that a server cannot bind,
    and the processes holding them."""
    ports = [p for p in ports if p.port]
    problems: list[str] = []
    seen: dict[int, Holder] = {}
    for i, p in enumerate(ports):
        twin = next((q for q in ports[:i] if q.port == p.port), None)
        if twin:
            problems.append(f"port {p.port} is given twice: {twin.option} and {p.option}")
            continue
        error = bind_error(host, p.port)
        if error is None:
            continue
        where = f"port {p.port} ({p.name}, {p.option}) on {host}"
        if error.errno != errno.EADDRINUSE:
            problems.append(f"{where} cannot be bound: {error}")
            continue
        found = port_holders(p.port, proc)
        seen.update((h.pid, h) for h in found)
        by = ", ".join(f"pid {h.pid}" for h in found) or "a process this user cannot see (`sudo ss -ltnp` names it)"
        problems.append(f"{where} is already in use by {by}")
    if problems:
        commands = [f"  pid {h.pid}: {h.command[:COMMAND_SHOWN]}" for h in seen.values()]
        raise PortUnavailable(
            "\n".join([*problems, *commands, f"Stop what holds it ({STOP_HINT}) or choose other ports."])
        )
