"""The stand-in's executor, responder and metrics with a fake engine and a fake response
sender: queue bound, admission, validation at fetch, stop by Triton request id, client
cancellation, finals, and the nv_trt_llm_* series - each against the cited table."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from contract.upstream.backend_semantics import backend_semantics
from model_repository.engine_step.runner import HandleStatus
from model_repository.engine_step.engine_inputs import EngineInputs
from model_repository.triton.response_channel import ResponseChannel
from standins.trtllm import upstream
from standins.trtllm.engine import AccountingBackend, SequenceStats
from standins.trtllm.executor import ExecutorLimits, ExecutorStats, StandinExecutor
from standins.trtllm.metrics import iteration_stats, labels, series, updates
from standins.trtllm.request import parse_request
from standins.trtllm.responder import Responder
from standins.trtllm.settings import EngineLimits
from standins.trtllm.upstream import UpstreamError

SEM = backend_semantics(upstream.PINNED_VERSION)
FINAL = 2
OUTPUTS = ("output_ids", "sequence_length", "cum_log_probs", "output_log_probs")


class FakeEngine:
    def __init__(self):
        self.sinks: dict[str, object] = {}
        self.requests: dict[str, object] = {}
        self.stopped: list[str] = []

    def submit(self, request, sink, request_id=""):
        self.sinks[request_id], self.requests[request_id] = sink, request

    def stop(self, request_id):
        self.stopped.append(request_id)


@dataclass
class FakeSender:
    sent: list = field(default_factory=list)
    cancelled: bool = False

    def send(self, response=None, flags=0):
        self.sent.append((response, flags))

    def is_cancelled(self):
        return self.cancelled

    @property
    def final(self):
        return [r for r, f in self.sent if f == FINAL]


def responder(sender=None, outputs=OUTPUTS):
    sender = sender or FakeSender()
    return Responder(SEM, ResponseChannel(sender, FINAL), outputs, make_response=lambda arrays: arrays,
                     make_error=lambda code, message: ("error", code, message)), sender


def rows(n_prompt=3, max_new=4, streaming=True, **extra):
    arrays = {"input_ids": np.arange(1, n_prompt + 1, dtype=np.int32)[None], "request_output_len": np.array([max_new]),
              "streaming": np.array([streaming]), **{k: np.asarray(v) for k, v in extra.items()}}
    return parse_request(SEM, arrays, decoupled=True, exclude_input_default=True)


def executor(max_active=2, max_queue_size=0, max_input_len=16, max_seq_len=32, guard_streaming=False, max_draft_len=0):
    engine = FakeEngine()
    limits = ExecutorLimits(max_active=max_active, max_queue_size=max_queue_size, max_input_len=max_input_len,
                            max_seq_len=max_seq_len, vocab_size_padded=100, max_beam_width=1,
                            guard_streaming=guard_streaming, max_draft_len=max_draft_len)
    return StandinExecutor(SEM, engine, limits), engine


def test_executor_ids_start_at_one_and_admission_is_bounded_by_the_batch():
    ex, engine = executor(max_active=2)
    ids = [ex.enqueue(rows(), responder()[0], f"r{i}")[0] for i in range(3)]
    assert ids == [1, 2, 3]
    assert sorted(engine.sinks) == ["1", "2"] and ex.stats() == ExecutorStats(active=2, queued=1, max_active=2)
    engine.sinks["1"].send([7], [0.0], 0.0, True)  # a final frees a slot: the queue head is fetched
    assert sorted(engine.sinks) == ["1", "2", "3"] and ex.stats().queued == 0


def test_queue_bound_counts_only_queued_requests_and_refuses_with_upstreams_text():
    ex, engine = executor(max_active=1, max_queue_size=1)
    ex.enqueue(rows(), responder()[0], "a")  # active
    ex.enqueue(rows(), responder()[0], "b")  # queued: 1 of 1
    with pytest.raises(UpstreamError) as err:
        ex.enqueue(rows(), responder()[0], "c")
    assert err.value.message == "Maximum queue size of 1 has been reached, please try again later"
    assert err.value.code == "INTERNAL" and ex.registry.lookup("c") == set()  # never registered


def test_prompt_over_the_effective_max_input_len_fails_when_fetched():
    ex, engine = executor(max_input_len=4)
    target, sender = responder()
    ex.enqueue(rows(n_prompt=5), target, "long")
    (error,) = sender.final
    assert error[:2] == ("error", "INTERNAL")
    assert error[2] == ("Executor failed process requestId 1 due to the following error: Encountered an error when "
                        "fetching new request: Prompt length (5) exceeds maximum input length (4). Set log level to "
                        "info and check TRTGptModel logs for how maximum input length is set")
    assert not engine.sinks and ex.registry.lookup("long") == set()


def test_output_len_is_clamped_to_the_sequence_limit_not_refused():
    ex, engine = executor(max_seq_len=10)
    ex.enqueue(rows(n_prompt=4, max_new=50), responder()[0])
    assert engine.requests["1"].request_output_len == 6  # row limit.output_len_clamped


def test_draft_tokens_over_the_engines_max_draft_len_fail_when_fetched():
    """Row error.draft_tokens_too_long: an engine built without speculative decoding has max_draft_len 0."""
    for max_draft_len, drafts in ((0, 1), (4, 5)):
        ex, engine = executor(max_draft_len=max_draft_len)
        target, sender = responder()
        ex.enqueue(rows(streaming=False, draft_input_ids=np.arange(drafts, dtype=np.int32)[None]), target, "d")
        (error,) = sender.final
        assert error[2] == ("Executor failed process requestId 1 due to the following error: Encountered an error "
                            "when fetching new request: Draft tokens length "
                            f"({drafts}) exceeds maximum draft tokens length ({max_draft_len}).")
        assert not engine.sinks


def test_draft_tokens_are_verified_and_count_against_the_sequence_limit():
    """Row input.draft_input_ids: accepted within max_draft_len; row limit.output_len_clamped
    leaves room for one step's drafts (the request's, else the engine's max_draft_len)."""
    ex, engine = executor(max_seq_len=12, max_draft_len=4)
    ex.enqueue(rows(n_prompt=4, max_new=50, streaming=False, draft_input_ids=np.array([[7, 8]], np.int32)), responder()[0])
    ex.enqueue(rows(n_prompt=4, max_new=50, streaming=False), responder()[0])
    assert engine.requests["1"].request_output_len == 12 - 4 - 2
    assert engine.requests["2"].request_output_len == 12 - 4 - 4


def test_end_id_out_of_range_and_evictable_streaming():
    ex, _ = executor()
    target, sender = responder()
    ex.enqueue(rows(end_id=[100]), target)
    assert sender.final[0][2].endswith("Encountered an error when fetching new request: "
                                       "[TensorRT-LLM][ERROR] Assertion failed: EndId (100) is not within acceptable range [-1, 100).")
    ex, _ = executor(max_input_len=8, guard_streaming=True)
    target, sender = responder()
    ex.enqueue(rows(n_prompt=4, max_new=8), target)
    assert "Request sequence length is potentially greater than max input length" in sender.final[0][2]


def test_beam_width_over_the_max_waits_for_an_empty_batch_then_fails():
    ex, engine = executor()
    ex.enqueue(rows(), responder()[0])
    target, sender = responder()
    ex.enqueue(rows(beam_width=[2]), target)
    assert not sender.sent and ex.stats().queued == 1  # not the operating beam width: waits
    engine.sinks["1"].send([7], [0.0], 0.0, True)
    assert sender.final[0][2] == ("Executor failed process requestId 2 due to the following error: Encountered an "
                                  "error in forwardAsync function: [TensorRT-LLM][ERROR] Assertion failed: Requested "
                                  "beam width 2 is larger than configured max beam width 1")


def test_stop_cancels_the_requests_registered_under_the_stop_requests_own_id():
    ex, engine = executor()
    first, first_sender = responder()
    ex.enqueue(rows(), first, "dup")
    ex.enqueue(rows(), responder()[0], "dup")  # replaces the first entry
    ex.stop("dup")
    assert engine.stopped == ["2"]
    ex.stop("unknown")  # not an error
    # The stopped request ends through the normal path: a final result, no error.
    engine.sinks["2"].send([], [], 0.0, True)
    assert ex.registry.lookup("dup") == set()
    engine.sinks["1"].send([8], [0.0], 0.0, True)
    assert first_sender.final[0]["output_ids"].tolist() == [[[8]]]


def test_client_cancellation_is_polled_for_active_and_queued_requests():
    ex, engine = executor(max_active=1)
    active, active_sender = responder()
    queued, queued_sender = responder()
    ex.enqueue(rows(), active)
    ex.enqueue(rows(), queued)
    active_sender.cancelled = queued_sender.cancelled = True
    assert ex.poll_cancelled() == 2
    assert engine.stopped == ["1"]
    engine.sinks["1"].send([], [], 0.0, True)  # the engine ends the stopped request
    assert engine.stopped == ["1", "2"]  # the queued one is stopped as soon as it is active


def test_final_flag_only_with_the_last_row_of_a_batch():
    ex, engine = executor()
    target, sender = responder()
    arrays = {"input_ids": np.array([[1, 2], [3, 0]], np.int32), "input_lengths": np.array([2, 1]),
              "request_output_len": np.array([4, 4]), "streaming": np.array([True])}
    ex.enqueue(parse_request(SEM, arrays, decoupled=True, exclude_input_default=True), target, "batch")
    engine.sinks["1"].send([5], [0.0], 0.0, True)
    assert [flags for _, flags in sender.sent] == [0]
    engine.sinks["2"].send([6], [0.0], 0.0, True)
    assert [flags for _, flags in sender.sent] == [0, FINAL]


def test_several_sequences_answer_by_index_and_the_request_ends_with_the_last():
    """Rows output.sequence_results, output.sequence_index, request_id.executor_ids,
    error.queue_full: each sample answers with its sequence_index; a sample that ends first
    ends with a non-final response (upstream says nothing of its end); the request's final
    flag goes with the last sample's last result; children take executor ids and count
    against the queue bound."""
    ex, engine = executor(max_active=1, max_queue_size=3)
    target, sender = responder(outputs=OUTPUTS + ("sequence_index",))
    assert ex.enqueue(rows(num_return_sequences=np.array([3])), target, "n3") == [1]
    assert engine.requests["1"].options.num_return_sequences == 3
    assert ex.enqueue(rows(), responder()[0], "next") == [4]  # ids 2 and 3 are the children of 1
    with pytest.raises(UpstreamError, match="Maximum queue size of 3"):  # 1 queued + 3 children > 3
        ex.enqueue(rows(num_return_sequences=np.array([3])), responder()[0], "full")
    sink = engine.sinks["1"]
    sink.send([5], [0.0], 0.0, False, 1)
    sink.send([6], [0.0], 0.0, True, 0)  # sample 0 ends first: not the request's end
    sink.send([7], [0.0], 0.0, True, 2)
    sink.send([8], [0.0], 0.0, True, 1)  # the last sample's last result: final
    assert [(int(r["sequence_index"][0, 0]), r["output_ids"].tolist(), f) for r, f in sender.sent] == \
        [(1, [[[5]]], 0), (0, [[[6]]], 0), (2, [[[7]]], 0), (1, [[[8]]], FINAL)]
    sink.send([9], [0.0], 0.0, True, 1)  # nothing after the end
    assert len(sender.sent) == 4 and "4" in engine.sinks  # the slot went to the next request
    one = responder(outputs=OUTPUTS + ("sequence_index",))
    ex2, engine2 = executor()
    ex2.enqueue(rows(), one[0], "one")
    engine2.sinks["1"].send([5], [0.0], 0.0, True)
    assert "sequence_index" not in one[1].sent[0][0]  # row output.sequence_index: only with n > 1


def test_num_return_sequences_below_one_is_refused_with_the_failed_check():
    with pytest.raises(UpstreamError) as err:
        rows(num_return_sequences=np.array([0]))
    assert err.value.message.endswith("numReturnSequences.value() > 0")


def test_engine_failures_become_executor_errors():
    ex, engine = executor()
    target, sender = responder()
    ex.enqueue(rows(), target)
    engine.sinks["1"].fail("the engine could not schedule the request")
    assert sender.final[0][2] == ("Executor failed process requestId 1 due to the following error: "
                                  "the engine could not schedule the request")


def test_metric_series_and_values_come_from_the_table():
    all_series = series(SEM)
    names = {s.family for s in all_series}
    assert {"nv_trt_llm_request_metrics", "nv_trt_llm_kv_cache_block_metrics", "nv_llm_output_token_len"} <= names
    waiting = next(s for s in all_series if s.family == "nv_trt_llm_request_metrics" and s.label == "waiting")
    assert labels("tensorrt_llm", "1", waiting) == {"model": "tensorrt_llm", "version": "1", "request_type": "waiting"}
    stats = iteration_stats(ExecutorStats(active=3, queued=5, max_active=4),
                            SequenceStats(running=3, in_context=1, context_tokens=40, used_blocks=6, max_blocks=24,
                                          tokens_per_block=32), scheduled=2, iteration=7, now_s=1.0)
    values = {(s.family, s.label): v for s, v in updates(all_series, stats)}
    assert values[("nv_trt_llm_request_metrics", "waiting")] == 1  # active - scheduled; queued count nowhere
    assert values[("nv_trt_llm_request_metrics", "active")] == 3
    assert values[("nv_trt_llm_kv_cache_block_metrics", "free")] == 18
    assert values[("nv_trt_llm_kv_cache_block_metrics", "fraction")] == 0.25
    assert values[("nv_trt_llm_general_metrics", "timestamp")] == 1e6
    assert not any(s.kind == "histogram" for s, _ in updates(all_series, stats))


def test_kv_block_accounting_of_running_sequences():
    class Handle:
        def read(self):
            return [1, 2, 3], [0.0] * 3

        def status(self):
            return HandleStatus.RUNNING

        def cancel(self):
            pass

    class Backend:
        def add(self, key, request):
            return Handle()

    books = AccountingBackend(Backend(), EngineLimits(max_batch_size=2, max_seq_len=64, max_num_tokens=32,
                                                      vocab_size_padded=10), tokens_per_block=32)
    handle = books.add(0, EngineInputs(input_ids=tuple(range(30)), input_lengths=30, request_output_len=8))
    assert books.sequences() == SequenceStats(running=1, in_context=1, context_tokens=30, used_blocks=1,
                                              max_blocks=4, tokens_per_block=32)
    handle.read()  # 33 tokens: a second block
    assert books.sequences().used_blocks == 2 and books.sequences().in_context == 0
    handle.cancel()
    assert books.sequences().running == 0


def test_a_stopped_request_ends_with_the_tokens_not_sent_yet():
    """The CPU engine's stop path as upstream's executor ends a cancelled request (row
    cancel.final_result): a non-streaming request's final response carries all its tokens."""
    from model_repository.engine_step.runner import EngineRunner
    from tests.unit.test_runner import FakeBackend, Sink, request

    runner = EngineRunner(FakeBackend({0: list(range(100, 200))}))
    sink = Sink()
    runner.run_once([(request(0, max_new=50, streaming=False), sink, 0.0, "x")])
    runner.run_once([])
    runner.run_once([], {"x"})
    assert sink.finals == 1 and sink.error is None and sink.tokens == [100, 101]


class FakeFamily:
    """pb_utils.MetricFamily as the publisher uses it (the adapter hands the real one in)."""
    GAUGE, COUNTER, HISTOGRAM = "gauge", "counter", "histogram"
    made: list["FakeFamily"] = []

    def __init__(self, name, description, kind):
        self.name, self.kind, self.metrics = name, kind, []
        FakeFamily.made.append(self)

    def Metric(self, labels, buckets=None):  # noqa: N802 (pb_utils' name)
        metric = FakeMetric(labels, buckets)
        self.metrics.append(metric)
        return metric


@dataclass
class FakeMetric:
    labels: dict
    buckets: list | None
    values: list = field(default_factory=list)

    def set(self, value):
        self.values.append(value)

    def observe(self, value):
        self.values.append(value)


def test_the_publisher_takes_its_metric_family_from_the_adapter():
    """No Triton import in the publisher: gauges from the snapshot, token-length histograms
    from the finished requests, each family made once with the table's kind and labels."""
    from standins.trtllm.publisher import TOTAL_INPUT, TOTAL_OUTPUT, StandinMetricsPublisher

    FakeFamily.made.clear()
    all_series = series(upstream.semantics())
    gauge = next(s for s in all_series if s.kind == "gauge")
    publisher = StandinMetricsPublisher(FakeFamily, "tensorrt_llm", "1", all_series, lambda: {gauge.key: 7.0}, 60)
    assert len({f.name for f in FakeFamily.made}) == len(FakeFamily.made) == len({s.family for s in all_series})
    assert {f.kind for f in FakeFamily.made} == {s.kind for s in all_series}
    publisher.observe_request(5, 3)
    publisher.publish_once()
    metrics = {(f.name, tuple(sorted(m.labels.items()))): m for f in FakeFamily.made for m in f.metrics}
    assert metrics[(gauge.family, tuple(sorted(labels("tensorrt_llm", "1", gauge).items())))].values == [7.0]
    observed = sorted(v for f in FakeFamily.made if f.kind == "histogram" for m in f.metrics for v in m.values)
    histograms = [s for s in all_series if s.kind == "histogram" and s.key in (TOTAL_INPUT, TOTAL_OUTPUT)]
    assert observed == sorted(float({TOTAL_INPUT: 5, TOTAL_OUTPUT: 3}[s.key]) for s in histograms) and histograms
