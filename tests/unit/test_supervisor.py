import threading
import time

import pytest

from contract.supervision import SupervisionRecord
from serving.canary import CanaryResult, CanarySettings
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

    def set_ready(self, ready):
        self.ready = ready


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


class FakeCanary:
    """Answers as scripted: one list of entries that fail per round."""

    def __init__(self, rounds, failures_to_wedge=2):
        self.rounds = list(rounds)
        self.settings = CanarySettings(failures_to_wedge=failures_to_wedge, period_s=0.01)

    def probe(self):
        failing = self.rounds.pop(0) if self.rounds else ()
        return [CanaryResult(e, e not in failing, 0.1, "answered" if e not in failing else "no answer within 15s")
                for e in ("ensemble", "tensorrt_llm_bls")]


def test_an_entry_that_stops_answering_is_not_ready_at_once_and_wedged_after_n_failures(tmp_path):
    server, messages = FakeServer(), []
    record_file = tmp_path / "supervision.json"
    canary = FakeCanary([(), ("tensorrt_llm_bls",), ("tensorrt_llm_bls",)], failures_to_wedge=2)
    supervisor = Supervisor(server, report=messages.append, canary=canary, record_file=record_file)
    supervisor.started()
    supervisor.check_canary()
    assert server.ready is True and supervisor.wedge() is None
    supervisor.check_canary()
    assert server.ready is False and supervisor.wedge() is None  # one failure: not ready, not wedged
    supervisor.check_canary()
    why = supervisor.wedge()
    assert why.startswith("wedged: tensorrt_llm_bls gave no answer") and "2 canaries in a row" in why
    supervisor.restart(why)
    assert server.starts == 1 and server.ready is True and supervisor.wedge() is None
    assert SupervisionRecord.read(record_file) == SupervisionRecord({"wedged": 1}, {"tensorrt_llm_bls": 1})
    supervisor.check_canary()  # the new server answers
    assert server.ready is True and supervisor.tracker.failures["tensorrt_llm_bls"] == 0


def test_an_answer_in_between_resets_the_count():
    server = FakeServer()
    canary = FakeCanary([("ensemble",), (), ("ensemble",)], failures_to_wedge=2)
    supervisor = Supervisor(server, report=lambda m: None, canary=canary)
    for _ in range(3):
        supervisor.check_canary()
    assert supervisor.wedge() is None and supervisor.tracker.wedges == {}


def test_restarts_are_counted_by_reason(tmp_path):
    server = FakeServer()
    record_file = tmp_path / "supervision.json"
    supervisor = Supervisor(server, report=lambda m: None, record_file=record_file)
    supervisor.started()
    server.running = False
    supervisor.restart(supervisor.problem())
    server.stubs.discard(min(server.stubs))
    supervisor.restart(supervisor.problem())
    assert SupervisionRecord.read(record_file).restarts == {"server_exited": 1, "stub_died": 1}


def test_the_watch_restarts_a_wedged_server():
    server = FakeServer()
    canary = FakeCanary([("ensemble",)] * 3, failures_to_wedge=2)
    supervisor = Supervisor(server, RestartPolicy(check_interval_s=0.01), report=lambda m: None, canary=canary)
    supervisor.started()
    stop = threading.Event()
    watcher = threading.Thread(target=supervisor.watch, args=(stop,))
    watcher.start()
    deadline = time.monotonic() + 5
    while server.starts == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    watcher.join(5)
    assert server.starts >= 1 and supervisor.record.restarts.get("wedged", 0) >= 1
