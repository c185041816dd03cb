"""The CPU engine's step loop, driven with a fake backend (no OpenVINO, no Triton)."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field

from model_repository.engine_step.runner import EngineRunner, FailCode, HandleStatus
from model_repository.engine_step.engine_inputs import EngineInputs


@dataclass
class FakeHandle:
    script: list[int]  # tokens it will generate, one per step
    end_id: int
    max_new: int
    produced: list[int] = field(default_factory=list)
    unread: list[int] = field(default_factory=list)
    state: HandleStatus = HandleStatus.RUNNING

    def advance(self):
        if self.state != HandleStatus.RUNNING:
            return
        token = self.script[len(self.produced)]
        self.produced.append(token)
        self.unread.append(token)
        if token == self.end_id or len(self.produced) >= self.max_new:
            self.state = HandleStatus.FINISHED

    def read(self):
        ids, self.unread = self.unread, []
        return ids, [-0.5] * len(ids)

    def status(self):
        return self.state

    def stop(self):
        self.state = HandleStatus.STOPPED

    def cancel(self):
        self.state = HandleStatus.CANCELLED


class FakeBackend:
    def __init__(self, scripts):
        self.scripts = scripts
        self.handles: dict[int, FakeHandle] = {}
        self.batch_sizes: list[int] = []

    def add(self, request_id, request):
        h = FakeHandle(self.scripts[request.input_ids[0]], request.end_id, request.request_output_len)
        self.handles[request_id] = h
        return h

    def step(self):
        running = [h for h in self.handles.values() if h.state == HandleStatus.RUNNING]
        self.batch_sizes.append(len(running))
        for h in running:
            h.advance()

    def has_unfinished(self):
        return any(h.state == HandleStatus.RUNNING for h in self.handles.values())

    def stats(self):
        return {}


class Sink:
    def __init__(self):
        self.chunks: list[list[int]] = []
        self.finals = 0
        self.error: str | None = None
        self.cancelled = False
        self.done = threading.Event()

    def is_cancelled(self):
        return self.cancelled

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None):
        assert not self.done.is_set(), "response after the final one"
        self.chunks.append(list(ids))
        self.cum = cum_log_prob
        if final:
            self.finals += 1
            self.done.set()

    def fail(self, message, code=FailCode.INTERNAL):
        self.error = message
        self.code = code
        self.done.set()

    @property
    def tokens(self):
        return [t for c in self.chunks for t in c]


def request(key, max_new=10, streaming=True, end_id=2, stops=()):
    return EngineInputs(input_ids=(key,), input_lengths=1, request_output_len=max_new, end_id=end_id,
                        streaming=streaming, stop_words_list=stops)


def test_streaming_and_non_streaming_with_in_flight_joining():
    backend = FakeBackend({0: [10, 11, 12, 2], 1: [20, 21, 22, 23, 24, 25], 2: [30, 31, 2]})
    runner = EngineRunner(backend)
    a, b, c = Sink(), Sink(), Sink()
    runner.run_once([(request(0), a, 0.0, "")])
    runner.run_once([(request(1, max_new=5, streaming=False), b, 0.0, "")])  # joins the running batch
    runner.run_once([(request(2), c, 0.0, "")])
    while runner.counts()[0]:
        runner.run_once([])
    assert a.chunks == [[10], [11], [12], [2]] and a.finals == 1
    assert b.chunks == [[20, 21, 22, 23, 24]] and b.finals == 1  # one response at the end
    assert c.tokens == [30, 31, 2]
    assert max(backend.batch_sizes) == 3  # all three ran in the same steps
    assert a.cum == -2.0


def test_multi_token_stop_word_stops_the_sequence():
    backend = FakeBackend({0: [5, 6, 7, 8, 9, 10]})
    runner = EngineRunner(backend)
    sink = Sink()
    runner.run_once([(request(0, stops=((7, 8),)), sink, 0.0, "")])
    while runner.counts()[0]:
        runner.run_once([])
    assert sink.tokens == [5, 6, 7, 8] and sink.finals == 1
    assert backend.handles[0].state == HandleStatus.STOPPED


def test_cancelled_request_is_dropped_and_its_slot_freed():
    backend = FakeBackend({0: list(range(100, 200)), 1: [1, 2]})
    runner = EngineRunner(backend)
    a, b = Sink(), Sink()
    runner.run_once([(request(0, max_new=50), a, 0.0, ""), (request(1), b, 0.0, "")])
    a.cancelled = True
    runner.run_once([])
    assert a.error == "cancelled" and a.code == FailCode.CANCELLED and backend.handles[0].state == HandleStatus.CANCELLED
    assert b.tokens == [1, 2] and runner.counts() == (0, 0)  # the other request went on; nothing leaked


def test_backend_rejection_fails_only_that_request():
    class Picky(FakeBackend):
        def add(self, request_id, request):
            if request.input_ids[0] == 9:
                raise ValueError("prompt too long")
            return super().add(request_id, request)

    runner = EngineRunner(Picky({0: [1, 2]}))
    bad, good = Sink(), Sink()
    runner.run_once([(request(9), bad, 0.0, ""), (request(0), good, 0.0, "")])
    while runner.counts()[0]:
        runner.run_once([])
    assert "prompt too long" in bad.error and good.tokens == [1, 2]


def test_thread_sleeps_when_idle_and_serves_submissions():
    backend = FakeBackend({0: [1, 2], 1: [3, 2]})
    runner = EngineRunner(backend)
    runner.start()
    try:
        time.sleep(0.2)
        assert runner.steps == 0  # no busy stepping without work
        sinks = [Sink(), Sink()]
        for key, sink in enumerate(sinks):
            runner.submit(request(key), sink)
        assert all(s.done.wait(5) for s in sinks)
        assert [s.tokens for s in sinks] == [[1, 2], [3, 2]]
    finally:
        runner.shutdown()
    late = Sink()
    runner.submit(request(0), late)
    assert late.error == "the engine is shutting down"


def test_stop_by_request_id_cancels_only_that_request():
    backend = FakeBackend({0: list(range(100, 200)), 1: list(range(200, 300))})
    runner = EngineRunner(backend)
    a, b = Sink(), Sink()
    runner.run_once([(request(0, max_new=50), a, 0.0, "req-a"), (request(1, max_new=3), b, 0.0, "req-b")])
    runner.run_once([], {"req-a"})
    assert a.error is None and a.finals == 1 and backend.handles[0].state == HandleStatus.CANCELLED  # a final, no error
    while runner.counts()[0]:
        runner.run_once([])
    assert b.tokens == [200, 201, 202] and b.finals == 1


def test_full_engine_refuses_at_once():
    backend = FakeBackend({k: list(range(100)) for k in range(4)})
    runner = EngineRunner(backend, capacity=2)
    sinks = [Sink() for _ in range(3)]
    for key, sink in enumerate(sinks):
        runner.submit(request(key, max_new=50), sink)
    assert sinks[2].code == FailCode.UNAVAILABLE and "full (2 requests" in sinks[2].error
    assert sinks[0].error is None and sinks[1].error is None


def test_request_waiting_too_long_for_its_first_token_fails():
    class Saturated(FakeBackend):  # admits but never schedules request 1
        def step(self):
            for key, h in self.handles.items():
                if key == 0 and h.state == HandleStatus.RUNNING:
                    h.advance()

    now = [0.0]
    runner = EngineRunner(Saturated({0: list(range(100)), 1: list(range(100))}), clock=lambda: now[0], queue_timeout_s=5)
    first, second = Sink(), Sink()
    runner.run_once([(request(0, max_new=90), first, 0.0, ""), (request(1, max_new=90), second, 0.0, "")])
    now[0] = 6.0
    runner.run_once([])
    assert second.code == FailCode.UNAVAILABLE and "no first token after 6s" in second.error
    assert first.error is None  # it had tokens: a long answer is not a queue timeout


def test_stream_interval_grows_with_the_batch_but_the_first_token_goes_alone():
    backend = FakeBackend({k: list(range(100 * k, 100 * k + 50)) for k in range(10)})
    runner = EngineRunner(backend, stream_interval=0)
    assert [runner.stream_interval(n) for n in (1, 4, 5, 8, 9, 32)] == [1, 1, 2, 2, 4, 4]
    sinks = [Sink() for _ in range(10)]
    runner.run_once([(request(k, max_new=13, end_id=-1), sinks[k], 0.0, "") for k in range(10)])
    while runner.counts()[0]:
        runner.run_once([])
    for k, sink in enumerate(sinks):
        assert sink.tokens == list(range(100 * k, 100 * k + 13))  # nothing lost or repeated
        assert [len(c) for c in sink.chunks][0] == 1  # first token at once
        assert max(len(c) for c in sink.chunks) == 4 and sink.finals == 1


class SequencesSink(Sink):
    """Records each sequence's chunks apart (num_return_sequences)."""

    def __init__(self):
        super().__init__()
        self.by_sequence: dict[int, list[int]] = {}
        self.final_sequences: list[int] = []

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None):
        self.by_sequence.setdefault(sequence, []).extend(ids)
        if final:
            self.final_sequences.append(sequence)


class ForkingHandle(FakeHandle):
    """n samples: sequence k yields script[k] token by token; sequence 0 ends at the end id."""

    def __init__(self, scripts, end_id, max_new):
        super().__init__(scripts[0], end_id, max_new)
        self.scripts, self.unread_by = scripts, {k: [] for k in range(len(scripts))}
        self.steps = 0

    def advance(self):
        if self.state != HandleStatus.RUNNING:
            return
        for k, script in enumerate(self.scripts):
            if self.steps < len(script):
                self.unread_by[k].append(script[self.steps])
        self.steps += 1
        if self.steps >= max(len(s) for s in self.scripts):
            self.state = HandleStatus.FINISHED

    def read_sequences(self):
        out = {k: (ids, [-1.0] * len(ids)) for k, ids in self.unread_by.items() if ids}
        self.unread_by = {k: [] for k in self.unread_by}
        return out


def _n_request(n, guided="", seed=7):
    from model_repository.engine_step.engine_inputs import GenerationOptions

    return dataclasses.replace(request(0, max_new=10), seed=seed, runtime_top_k=0, runtime_top_p=1.0,
                               options=GenerationOptions(num_return_sequences=n, guided_decoding_guide_type=guided,
                                                         guided_decoding_guide="x" if guided else ""))


def test_n_sequences_stream_apart_each_with_its_own_final():
    class Backend(FakeBackend):
        def add(self, request_id, req):
            h = ForkingHandle([[10, 2], [20, 21, 22], [30, 31]], req.end_id, req.request_output_len)
            self.handles[request_id] = h
            return h

    runner = EngineRunner(Backend({}))
    sink = SequencesSink()
    runner.run_once([(_n_request(3), sink, 0.0, "")])
    while runner.counts()[0]:
        runner.run_once([])
    assert sink.by_sequence == {0: [10, 2], 1: [20, 21, 22], 2: [30, 31]}
    assert sorted(sink.final_sequences) == [0, 1, 2]  # one final per sequence


def test_guided_n_becomes_n_seeded_requests_when_the_backend_guides_only_one():
    class Backend(FakeBackend):
        guides_every_sequence = False

        def add(self, request_id, req):
            assert req.options.num_return_sequences == 1
            self.seeds.append(req.seed)
            return super().add(request_id, dataclasses.replace(req, input_ids=(len(self.seeds) - 1,)))

    backend = Backend({0: [10, 2], 1: [20, 2], 2: [30, 2]})
    backend.seeds = []
    runner = EngineRunner(backend)
    sink = SequencesSink()
    runner.submit(_n_request(3, guided="regex"), sink)
    runner.run_once([])  # nothing incoming: submit queued them
    with runner._cond:
        incoming, runner._incoming = runner._incoming, []
    runner.run_once(incoming)
    while runner.counts()[0]:
        runner.run_once([])
    assert backend.seeds == [7, 8, 9]
    assert sink.by_sequence == {0: [10, 2], 1: [20, 2], 2: [30, 2]} and sorted(sink.final_sequences) == [0, 1, 2]


def test_a_failed_step_fails_the_batch_and_lets_the_backend_recover():
    class Breaking(FakeBackend):
        recovered = 0

        def step(self):
            raise RuntimeError("grammar does not compile")

        def recover(self):
            self.recovered += 1
            self.handles.clear()

    backend = Breaking({0: [1, 2]})
    runner = EngineRunner(backend)
    runner.start()
    sink = Sink()
    runner.submit(request(0), sink)
    assert sink.done.wait(5)
    runner.shutdown()
    assert "engine step failed: grammar does not compile" in sink.error and backend.recovered >= 1


def _prioritized(k, priority):
    from model_repository.engine_step.engine_inputs import GenerationOptions

    return dataclasses.replace(request(k), options=GenerationOptions(priority=priority))


def test_priority_admission_with_a_running_limit():
    backend = FakeBackend({0: [1, 1, 1, 2], 1: [3, 2], 2: [4, 2], 3: [5, 2]})
    clock = [0.0]
    runner = EngineRunner(backend, clock=lambda: clock[0], max_running=1, aging_per_s=0.0)
    sinks = [Sink() for _ in range(4)]
    runner.run_once([(request(0), sinks[0], 0.0, "")])  # running
    runner.run_once([(_prioritized(1, 0.1), sinks[1], 0.0, ""), (_prioritized(2, 0.1), sinks[2], 0.0, ""),
                     (_prioritized(3, 0.9), sinks[3], 0.0, "")])
    assert runner.counts() == (1, 3)  # the three wait: running limit 1
    order = []
    for _ in range(20):
        runner.run_once([])
        for k, s in enumerate(sinks):
            if s.done.is_set() and k not in order:
                order.append(k)
    assert order == [0, 3, 1, 2]
    assert all(s.error is None for s in sinks)


def test_aging_admits_an_old_low_priority_request_before_newer_high_ones():
    backend = FakeBackend({k: [k + 10, 2] for k in range(6)})
    clock = [0.0]
    runner = EngineRunner(backend, clock=lambda: clock[0], max_running=1, aging_per_s=0.1)
    sinks = [Sink() for _ in range(6)]
    runner.run_once([(request(0), sinks[0], 0.0, ""), (_prioritized(1, 0.0), sinks[1], 0.0, "")])
    order = []
    for k in range(2, 6):  # a fresh priority-1.0 request arrives every 4 s
        clock[0] += 4.0
        runner.run_once([(_prioritized(k, 1.0), sinks[k], clock[0], "")])
        for _ in range(3):
            runner.run_once([])
            order += [j for j, s in enumerate(sinks) if s.done.is_set() and j not in order]
    # waiting 0.0 + 0.1/s overtakes a fresh 1.0 after 10 s: admitted before the later high ones
    assert order.index(1) < order.index(5)


def test_waiting_requests_are_stopped_cancelled_or_timed_out_without_reaching_the_engine():
    backend = FakeBackend({k: [k + 10, 11, 12, 2] for k in range(4)})
    clock = [0.0]
    runner = EngineRunner(backend, clock=lambda: clock[0], max_running=1, queue_timeout_s=5.0)
    sinks = [Sink() for _ in range(4)]
    runner.run_once([(request(0), sinks[0], 0.0, "run"), (request(1), sinks[1], 0.0, "stop-me"),
                     (request(2), sinks[2], 0.0, "cancel-me"), (request(3), sinks[3], 0.0, "slow")])
    sinks[2].cancelled = True
    runner.run_once([], stops={"stop-me"})
    assert sinks[1].done.is_set() and sinks[1].error is None and sinks[1].tokens == []  # an empty final
    assert sinks[2].error and "cancelled" in sinks[2].error
    clock[0] = 6.0
    runner.run_once([])
    assert sinks[3].error and "in the queue" in sinks[3].error
    assert sorted(backend.handles) == [0]  # only the running one ever reached the engine


def test_low_priority_requests_leave_the_reserved_seats_free():
    backend = FakeBackend({k: [k + 10] * 6 + [2] for k in range(6)})
    runner = EngineRunner(backend, clock=lambda: 0.0, max_running=4, reserved_from_low_priority=1)
    sinks = [Sink() for _ in range(6)]
    runner.run_once([(_prioritized(k, 0.1), sinks[k], 0.0, "") for k in range(5)])  # five low ones
    assert runner.counts() == (3, 2)  # three run, the fourth seat stays free for a default or high one
    runner.run_once([(request(5), sinks[5], 0.0, "")])  # default priority: takes it at once
    assert runner.counts() == (4, 2)


def test_the_reserve_is_off_without_a_running_limit():
    backend = FakeBackend({k: [k + 10, 2] for k in range(3)})
    runner = EngineRunner(backend, clock=lambda: 0.0, reserved_from_low_priority=2)
    runner.run_once([(_prioritized(k, 0.0), Sink(), 0.0, "") for k in range(3)])
    assert sorted(backend.handles) == [0, 1, 2]


class CountingSink(Sink):
    def __init__(self):
        super().__init__()
        self.asked = 0

    def is_cancelled(self):
        self.asked += 1
        return self.cancelled


def test_without_a_cancellation_period_each_step_asks_each_live_sink_once():
    # Admission does not ask again what the same step just asked of the waiting requests.
    backend = FakeBackend({0: list(range(100, 200)), 1: list(range(200, 300))})
    runner = EngineRunner(backend, max_running=1)
    running, waiting = CountingSink(), CountingSink()
    runner.run_once([(request(0, max_new=50), running, 0.0, ""), (request(1, max_new=50), waiting, 0.0, "")])
    assert (running.asked, waiting.asked) == (1, 1)
    runner.run_once([])
    assert (running.asked, waiting.asked) == (2, 2)
    running.cancelled = True
    runner.run_once([])  # the seat it frees goes to the waiting request in the same step
    assert running.code == FailCode.CANCELLED and sorted(backend.handles) == [0, 1] and waiting.tokens


def test_with_a_cancellation_period_the_step_thread_never_asks_the_sinks():
    # Triton's Python backend answers is_cancelled() with a round trip to the server: with a
    # period, only the canceller asks (poll_cancelled, run here by hand) and steps read its answer.
    backend = FakeBackend({0: list(range(100, 200)), 1: list(range(200, 300)), 2: list(range(300, 400))})
    runner = EngineRunner(backend, max_running=2, cancellation_check_period_s=60.0)  # never fires itself
    running, waiting, other = CountingSink(), CountingSink(), CountingSink()
    runner.run_once([(request(0, max_new=50), running, 0.0, ""), (request(2, max_new=20), other, 0.0, ""),
                     (request(1, max_new=50), waiting, 0.0, "")])
    for _ in range(5):
        runner.run_once([])
    assert running.asked == 0 and waiting.asked == 0  # steps (admission too) asked nothing
    running.cancelled = waiting.cancelled = True
    runner.run_once([])
    assert running.error is None and waiting.error is None  # not polled yet: still going
    assert runner.poll_cancelled() == 2  # the running one and the one waiting for a seat
    assert running.asked == 1 and waiting.asked == 1
    runner.run_once([])
    assert running.code == FailCode.CANCELLED and backend.handles[0].state == HandleStatus.CANCELLED
    assert waiting.code == FailCode.CANCELLED and len(backend.handles) == 2  # it never reached the engine
    while runner.counts()[0]:
        runner.run_once([])
    assert other.error is None and len(other.tokens) == 20  # the other stream went on
    assert runner.poll_cancelled() == 0  # nothing left to ask about


def test_the_canceller_thread_ends_a_cancelled_stream_within_its_period():
    class Slow(FakeBackend):
        def step(self):
            time.sleep(0.005)
            super().step()

    backend = Slow({0: list(range(100, 100_000))})
    runner = EngineRunner(backend, cancellation_check_period_s=0.05)
    runner.start()
    try:
        sink = CountingSink()
        runner.submit(request(0, max_new=90_000), sink)
        time.sleep(0.2)
        asked, steps = sink.asked, runner.steps
        assert steps > 10 and asked <= 0.2 / 0.05 + 2  # by period, not by step
        sink.cancelled = True
        assert sink.done.wait(2.0) and sink.code == FailCode.CANCELLED
    finally:
        runner.shutdown()
