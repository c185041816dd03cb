import os
import socket

import pytest

from serving.ports import (NamedPort, PortUnavailable, ensure_free, free_loopback_port, parse_proc_net_tcp,
                           port_holders, socket_inode)

# Two listeners (127.0.0.1:8001 and 0.0.0.0:8000), one established connection; as Linux prints them.
TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F41 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 4444 1 0000000000000000 20 4 30 10 -1
"""
TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1F42 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4545 1 0000000000000000 100 0 0 10 0
"""


def test_listening_sockets_are_parsed_with_address_port_and_inode():
    sockets = parse_proc_net_tcp(TCP)
    assert [(s.address, s.port, s.inode) for s in sockets] == [("127.0.0.1", 8001, 4242), ("0.0.0.0", 8000, 4343)]
    assert [(s.address, s.port, s.inode) for s in parse_proc_net_tcp(TCP6)] == [("::1", 8002, 4545)]


def test_socket_inode_of_an_fd_link():
    assert socket_inode("socket:[4242]") == 4242
    assert socket_inode("pipe:[4242]") is None and socket_inode("/dev/null") is None


def fake_proc(root, pid, cmdline, fd_links):
    (root / "net").mkdir(parents=True, exist_ok=True)
    (root / "net" / "tcp").write_text(TCP)
    (root / str(pid) / "fd").mkdir(parents=True)
    (root / str(pid) / "cmdline").write_bytes(b"\0".join(part.encode() for part in cmdline) + b"\0")
    for fd, target in enumerate(fd_links):
        os.symlink(target, root / str(pid) / "fd" / str(fd))


def test_the_holder_of_a_port_is_the_process_with_an_fd_on_its_socket(tmp_path):
    fake_proc(tmp_path, 77, ["tritonserver", "--grpc-port=8001"], ["/dev/null", "socket:[4242]"])
    fake_proc(tmp_path, 78, ["other"], ["socket:[4444]"])  # a connection to 8001, not the listener
    holders = port_holders(8001, tmp_path)
    assert [(h.pid, h.command) for h in holders] == [(77, "tritonserver --grpc-port=8001")]
    assert port_holders(9999, tmp_path) == []


def test_a_taken_port_is_refused_naming_port_option_and_holder():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(PortUnavailable) as e:
            ensure_free("127.0.0.1", [NamedPort("HTTP", "--http-port", free_loopback_port()),
                                      NamedPort("gRPC", "--grpc-port", port)])
    message = str(e.value)
    assert f"port {port} (gRPC, --grpc-port) on 127.0.0.1 is already in use by pid {os.getpid()}" in message
    assert f"pid {os.getpid()}: " in message and "make stop" in message
    assert "--http-port" not in message


def test_free_ports_pass_and_port_zero_means_off():
    ensure_free("127.0.0.1", [NamedPort("HTTP", "--http-port", free_loopback_port()), NamedPort("OpenAI", "--openai-port", 0)])


def test_a_port_given_twice_is_refused():
    port = free_loopback_port()
    with pytest.raises(PortUnavailable, match=f"port {port} is given twice: --http-port and --metrics-port"):
        ensure_free("127.0.0.1", [NamedPort("HTTP", "--http-port", port), NamedPort("metrics", "--metrics-port", port)])


def test_an_address_that_cannot_be_bound_is_named():
    with pytest.raises(PortUnavailable, match=r"port 8000 \(HTTP, --http-port\) on 192\.0\.2\.1 cannot be bound"):
        ensure_free("192.0.2.1", [NamedPort("HTTP", "--http-port", 8000)])  # TEST-NET: not ours
