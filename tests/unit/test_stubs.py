import subprocess
import sys
import time

import psutil
import pytest

from serving.stubs import (SHM_PREFIX, Leftover, ServerIdentity, StubCommand, belongs_to, find_leftovers,
                           is_stub_name, parse_stub_command, reap, unlink_regions)

REGION = f"{SHM_PREFIX}_7cff0c25-9e4b-4415-be79-1789a64daec6"
# A stub's argv as Triton 2.51 starts it (seen in ps).
ARGV = ["build/tritonserver/backends/python/triton_python_backend_stub", "/repo/openvino_llm/1/model.py", REGION,
        "1048576", "1048576", "23456", "build/tritonserver/backends/python", "336", "openvino_llm_0_0", "DEFAULT"]


def test_stub_command_line_names_model_region_and_parent():
    assert parse_stub_command(ARGV) == StubCommand(model="openvino_llm_0_0", shm_region=REGION, parent_pid=23456)


@pytest.mark.parametrize("argv", [[], ["tritonserver", "--grpc-port=1"], ARGV[:5],
                                  [ARGV[0], ARGV[1], "not-a-region", *ARGV[3:]],
                                  ["python", "-c", "triton_python_backend_stub"]])
def test_other_processes_are_not_stubs(argv):
    assert parse_stub_command(argv) is None


SERVER = ServerIdentity(pid=500, created=1000.0)
STUB = StubCommand("m_0_0", REGION, parent_pid=500)


def test_a_leftover_names_the_dead_server_or_sits_in_its_group_and_was_born_while_it_lived():
    assert belongs_to(SERVER, 501, pgid=500, created=1001.0, stub=STUB, until=2000.0)
    assert belongs_to(SERVER, 501, pgid=1, created=1001.0, stub=STUB, until=2000.0)  # reparented, left the group
    assert belongs_to(SERVER, 502, pgid=500, created=1001.0, stub=None, until=2000.0)  # a model's own child


def test_a_recycled_pid_or_the_server_itself_is_not_a_leftover():
    assert not belongs_to(SERVER, 500, pgid=500, created=1000.0, stub=None, until=2000.0)
    assert not belongs_to(SERVER, 501, pgid=500, created=900.0, stub=STUB, until=2000.0)  # older than the server
    assert not belongs_to(SERVER, 501, pgid=500, created=2500.0, stub=STUB, until=2000.0)  # born after it died
    assert not belongs_to(SERVER, 501, pgid=600, created=1001.0, stub=StubCommand("m", REGION, 600), until=2000.0)


def test_only_the_stubs_regions_are_unlinked(tmp_path):
    (tmp_path / REGION).write_bytes(b"x")
    (tmp_path / "other").write_bytes(b"x")
    unlink_regions([REGION, "other", f"{REGION}_missing"], shm_dir=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["other"]


IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(60)"


def test_reap_kills_what_ignores_sigterm_and_reports_it():
    process = subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM], stdout=subprocess.PIPE)
    process.stdout.readline()  # the handler is set
    messages = []
    start = time.monotonic()
    reap([Leftover(process.pid, "python -c ...", None)], grace_s=0.5, report=messages.append)
    assert not psutil.pid_exists(process.pid) and time.monotonic() - start < 5  # reap() waited for it
    assert messages == [f"reaped 1 process(es) left by tritonserver: {process.pid} (python -c ...); "
                        f"SIGKILL needed for [{process.pid}]"]


# A "server" in its own session whose child outlives it, like a stub does: it prints its child's pid.
FORKS_A_STUB = "import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', %r]); print(c.pid, flush=True)" % IGNORES_SIGTERM


def test_the_orphan_of_a_killed_server_is_found_by_its_process_group():
    server = subprocess.Popen([sys.executable, "-c", FORKS_A_STUB + "; import time; time.sleep(60)"],
                              stdout=subprocess.PIPE, start_new_session=True)
    orphan = int(server.stdout.readline())
    identity = ServerIdentity.of(server.pid)
    server.kill()
    server.wait()
    try:
        assert identity.is_alive() is False
        leftovers = find_leftovers(identity, until=time.time())
        assert [x.pid for x in leftovers] == [orphan]
        reap(leftovers, grace_s=0.2, report=lambda m: None)
        assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
    finally:
        if psutil.pid_exists(orphan):
            psutil.Process(orphan).kill()


def test_stub_names_as_linux_keeps_them():
    assert is_stub_name("triton_python_b") and is_stub_name("triton_python_backend_stub")
    assert not is_stub_name("triton") and not is_stub_name("tritonserver") and not is_stub_name("")


# In a child subreaper (like the launcher as pid 1 of a container): a "server" forks a stub
# (sleep, under the stub's file name) and is killed; the orphan comes back to us and dies.
SUBREAPER = """
import ctypes, os, subprocess, sys, time
from serving.stubs import ServerIdentity, find_leftovers
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
stub_file = sys.argv[1]
server = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys; c = subprocess.Popen([sys.argv[1], '60']); print(c.pid, flush=True); "
    "import time; time.sleep(60)", stub_file], stdout=subprocess.PIPE, start_new_session=True)
stub = int(server.stdout.readline())
identity = ServerIdentity.of(server.pid)
server.kill(); server.wait()
os.kill(stub, 9)
time.sleep(0.5)
assert open(f"/proc/{stub}/stat").read().split(") ")[1][0] == "Z"  # our zombie now
find_leftovers(identity, until=time.time())
print("collected" if not os.path.exists(f"/proc/{stub}") else "still a zombie")
"""


def test_a_stub_that_died_reparented_to_the_launcher_is_waited_for(tmp_path):
    stub_file = tmp_path / "triton_python_backend_stub"
    stub_file.symlink_to("/bin/sleep")
    result = subprocess.run([sys.executable, "-c", SUBREAPER, str(stub_file)], capture_output=True, text=True,
                            timeout=60)
    assert result.stdout.strip() == "collected", result.stderr
