import threading

import pytest

from serving.supervisor import GaveUp, RestartPolicy, Supervisor


class FakeServer:
    def __init__(self):
        self.running = True
        self.stubs = {10, 11, 12}
        self.starts = 0

    def start(self):
        self.starts += 1
        self.running = True
        self.stubs = {20 + self.starts, 30 + self.starts, 40 + self.starts}

    def wait_ready(self, timeout_s):
        pass

    def stop(self, drain=True):
        self.running = False
        return 0

    def is_running(self):
        return self.running

    def stub_pids(self):
        return set(self.stubs) if self.running else set()

    def expected_stubs(self):
        return 3


def test_healthy_server_is_left_alone():
    supervisor = Supervisor(FakeServer(), report=lambda m: None)
    supervisor.started()
    assert supervisor.problem() is None


def test_dead_stub_triggers_a_restart():
    server, messages = FakeServer(), []
    supervisor = Supervisor(server, report=messages.append)
    supervisor.started()
    server.stubs.discard(11)  # a stub was killed
    why = supervisor.problem()
    assert why == "Python-backend stub process(es) [11] died"
    supervisor.restart(why)
    assert server.starts == 1 and supervisor.problem() is None  # new stubs are the baseline
    assert "restarting tritonserver" in messages[0]


def test_exited_server_is_restarted_until_the_policy_gives_up():
    now = [0.0]
    server = FakeServer()
    supervisor = Supervisor(server, RestartPolicy(max_restarts=2, window_s=60), clock=lambda: now[0], report=lambda m: None)
    supervisor.started()
    for _ in range(2):
        server.running = False
        supervisor.restart(supervisor.problem())
        now[0] += 10
    server.running = False
    with pytest.raises(GaveUp, match="tritonserver exited; already restarted 2 times"):
        supervisor.restart(supervisor.problem())
    now[0] += 100  # outside the window: allowed again
    supervisor.restart("tritonserver exited")
    assert server.starts == 3


def test_stub_dead_before_the_first_look_is_noticed_too():
    server = FakeServer()
    server.stubs.discard(12)
    supervisor = Supervisor(server, report=lambda m: None)
    supervisor.started()
    assert supervisor.problem() == "1 Python-backend stub process(es) missing (2 of 3 alive)"


def test_watch_returns_when_asked():
    stop = threading.Event()
    stop.set()
    Supervisor(FakeServer(), RestartPolicy(check_interval_s=0.01)).watch(stop)
