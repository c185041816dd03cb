"""The close-once rule of ResponseChannel, with a fake sender that behaves like
python_backend's: after the final response its response factory is gone, so any
is_cancelled() then (or while the final send is under way) is the tritonserver crash."""

import sys
import threading
import time
import weakref

import pytest

from model_repository.triton.response_channel import ResponseChannel, SendPump

FINAL = 1


class FreedFactory(AssertionError):
    pass


class FakeSender:
    def __init__(self, cancelled=False, send_s=0.0):
        self.factory_alive = True
        self.in_send = False
        self.cancelled = cancelled
        self.send_s = send_s
        self.sent = []
        self.queries = 0

    def is_cancelled(self):
        if not self.factory_alive or self.in_send:
            raise FreedFactory("is_cancelled() reached a deleted response factory")
        self.queries += 1
        return self.cancelled

    def send(self, response=None, flags=0):
        if not self.factory_alive:
            raise FreedFactory("send() after the final response")
        self.in_send = True
        time.sleep(self.send_s)
        self.sent.append((response, flags))
        if flags == FINAL:
            self.factory_alive = False
        self.in_send = False


def test_after_the_final_send_nothing_reaches_the_sender():
    sender = FakeSender()
    channel = ResponseChannel(sender, FINAL)
    assert channel.send("a")
    assert channel.finish("b")
    assert channel.closed
    assert channel.is_cancelled() is False  # answered from our state
    assert channel.send("late") is False
    assert channel.finish() is False
    assert channel.refused_sends == 2
    assert sender.sent == [("a", 0), ("b", FINAL)]


def test_a_cancellation_seen_before_the_end_stays_seen():
    sender = FakeSender(cancelled=True)
    channel = ResponseChannel(sender, FINAL)
    assert channel.is_cancelled()
    channel.finish()
    assert channel.is_cancelled()
    assert sender.queries == 1


def test_a_watcher_polling_while_the_stream_ends_never_reaches_a_freed_factory():
    """What crashed tritonserver: a cancel watcher asking while the relay thread sends the
    final response.  Many watchers, many requests, sends that take time."""
    errors = []

    def one_request():
        sender = FakeSender(send_s=0.0005)
        channel = ResponseChannel(sender, FINAL)
        done = threading.Event()

        def watch():
            try:
                while not done.is_set():
                    channel.is_cancelled()
            except FreedFactory as e:
                errors.append(e)

        watchers = [threading.Thread(target=watch) for _ in range(3)]
        for w in watchers:
            w.start()
        try:
            for i in range(5):
                channel.send(i)
            channel.finish()
        except FreedFactory as e:
            errors.append(e)
        for _ in range(20):  # keep polling a while after the end
            channel.is_cancelled()
        done.set()
        for w in watchers:
            w.join()

    threads = [threading.Thread(target=one_request) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_the_unguarded_sender_does_fail_this_way():
    """The fake is strict enough to catch the bug the channel prevents."""
    sender = FakeSender()
    sender.send(None, FINAL)
    try:
        sender.is_cancelled()
    except FreedFactory:
        return
    raise AssertionError("the fake sender should refuse a query after the final response")


def test_rows_of_a_batched_request_share_one_final():
    from model_repository.triton.response_channel import SharedChannel

    sender = FakeSender()
    shared = SharedChannel(ResponseChannel(sender, FINAL), rows=3)
    a, b, c = shared.row(), shared.row(), shared.row()
    a.send("a1")
    a.finish("a2")  # row a ends: not the stream
    b.finish()  # an empty final of a row says nothing
    c.send("c1")
    assert sender.factory_alive
    c.finish("c2")
    assert sender.sent == [("a1", 0), ("a2", 0), ("c1", 0), ("c2", FINAL)]
    assert a.send("late") is False


class Tensor:
    pass


class PruningResponse:
    """A response as python_backend r24.10 treats it: output_tensors() hands out references to
    its tensors, and the sender drops (prunes) the response's own references during the send."""

    def __init__(self, n):
        self.tensors = [Tensor() for _ in range(n)]

    def output_tensors(self):
        return list(self.tensors)


class PruningSender(FakeSender):
    def send(self, response=None, flags=0):
        refs = [weakref.ref(t) for t in response.tensors]
        response.tensors.clear()  # PruneOutputTensors, without the GIL
        self.alive_in_send = [r() is not None for r in refs]  # freed here = freed without the GIL
        self.refs = refs
        super().send(None, flags)


def test_a_response_s_tensors_outlive_the_send_that_prunes_them():
    sender = PruningSender()
    channel = ResponseChannel(sender, FINAL)
    channel.send(PruningResponse(3))
    assert sender.alive_in_send == [True] * 3
    assert [r() for r in sender.refs] == [None] * 3  # released after the send
    channel.finish(PruningResponse(1))
    assert sender.alive_in_send == [True]


class GatedSender(FakeSender):
    """A send that waits, as python_backend's waits for tritonserver's acknowledgement."""

    def __init__(self):
        super().__init__()
        self.gate = threading.Event()
        self.threads = set()

    def send(self, response=None, flags=0):
        self.threads.add(threading.current_thread().name)
        self.gate.wait(5)
        super().send(response, flags)


def test_a_pumped_send_returns_before_triton_acknowledges_it():
    pump = SendPump("test-pump")
    sender = GatedSender()
    channel = ResponseChannel(sender, FINAL, pump)
    try:
        assert channel.send("a")  # returns while the send still waits on its gate
        assert sender.sent == [] and sender.threads == {"test-pump"}
        assert channel.finish("b")
        assert channel.closed and channel.is_cancelled() is False  # from our state: the final is on its way
        sender.gate.set()
    finally:
        pump.stop()
    assert sender.sent == [("a", 0), ("b", FINAL)]
    assert sender.queries == 0


def test_the_pump_keeps_each_channel_s_order_and_the_close_once_rule_under_watchers():
    pump = SendPump()
    errors = []
    senders = [FakeSender(send_s=0.0002) for _ in range(8)]
    channels = [ResponseChannel(s, FINAL, pump) for s in senders]
    done = threading.Event()

    def watch():
        try:
            while not done.is_set():
                for c in channels:
                    c.is_cancelled()
        except FreedFactory as e:
            errors.append(e)

    watchers = [threading.Thread(target=watch) for _ in range(2)]
    for w in watchers:
        w.start()
    for step in range(10):
        for c in channels:
            c.send(step) if step < 9 else c.finish(step)
    pump.stop()
    done.set()
    for w in watchers:
        w.join()
    assert errors == []
    for s in senders:
        assert s.sent == [(i, 0) for i in range(9)] + [(9, FINAL)]


def test_a_failing_send_is_counted_and_the_pump_goes_on():
    class Broken(FakeSender):
        def send(self, response=None, flags=0):
            raise RuntimeError("stub gone")

    pump = SendPump()
    good = FakeSender()
    ResponseChannel(Broken(), FINAL, pump).send("x")
    ResponseChannel(good, FINAL, pump).finish("y")
    pump.stop()
    assert pump.failed_sends == 1
    assert good.sent == [("y", FINAL)]


def test_a_stopped_pump_still_sends_on_the_caller_s_thread():
    pump = SendPump()
    pump.stop()
    sender = GatedSender()
    sender.gate.set()
    ResponseChannel(sender, FINAL, pump).finish("late")
    assert sender.sent == [("late", FINAL)] and sender.threads == {threading.current_thread().name}


@pytest.mark.parametrize("pumped", [False, True])
def test_a_send_racing_the_final_never_reaches_the_sender_after_it(pumped):
    """Two threads of one request (a token sender and one that ends it): whatever order they
    take, nothing is sent after the final response (the freed factory)."""
    pump = SendPump() if pumped else None
    errors = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch between any two bytecodes: the races get their chance
    try:
        _race_the_final(pump, errors)
    finally:
        sys.setswitchinterval(switch)
    assert errors == []


def _race_the_final(pump, errors):
    for _ in range(300):
        sender = FakeSender()
        channel = ResponseChannel(sender, FINAL, pump)
        start = threading.Barrier(2)

        def tokens(channel=channel, start=start):
            start.wait()
            for i in range(20):
                try:
                    channel.send(i)
                except FreedFactory as e:
                    errors.append(e)

        def end(channel=channel, start=start):
            start.wait()
            channel.finish("end")

        threads = [threading.Thread(target=tokens), threading.Thread(target=end)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if pump is not None:
            pump.stop()
            assert pump.failed_sends == 0  # a send after the final (the pump logs and counts it)
            pump = SendPump()
        assert sender.sent[-1] == ("end", FINAL)
    if pump is not None:
        pump.stop()
