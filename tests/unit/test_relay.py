"""The engine relay's logic with fake BLS streams: forwarding, the final response, errors,
and cancellation (before start, mid-stream, by the watcher)."""

import queue
import threading
import time

import pytest

from model_repository.engines.relay.relay import (CANCELLED, ERROR, FINISHED, FORWARDED_INPUTS, REQUESTED_OUTPUTS, Relay, stop_request_arrays)
from model_repository.engines.relay.relay_pool import CancelWatcher, RelayPool

END = object()


class FakeResponse:
    def __init__(self, outputs=("ids",), error=None):
        self._outputs, self._error = list(outputs), error

    def has_error(self):
        return self._error is not None

    def output_tensors(self):
        return self._outputs

    def error(self):
        return self._error


class FakeSink:
    def __init__(self):
        self.events = []
        self.client_gone = False

    def is_cancelled(self):
        return self.client_gone

    def forward(self, response):
        self.events.append(("data", tuple(response.output_tensors())))

    def forward_error(self, response):
        self.events.append(("engine-error", response.error()))

    def fail(self, message, code):
        self.events.append(("fail", code))

    def finish(self):
        self.events.append(("final",))


class QueueStream:
    """A BLS stream fed by the test, like the engine producing tokens over time."""

    def __init__(self):
        self.q = queue.Queue()

    def __iter__(self):
        while (item := self.q.get(timeout=5)) is not END:
            yield item


def never_cancel(request_id, stream):
    raise AssertionError("cancel_stream must not be called")


def test_forwards_every_response_then_a_final():
    sink = FakeSink()
    stream = [FakeResponse(("a",)), FakeResponse(()), FakeResponse(("b",))]  # empty ones are not forwarded
    assert Relay("r", sink, lambda: iter(stream), never_cancel).run() == FINISHED
    assert sink.events == [("data", ("a",)), ("data", ("b",)), ("final",)]


def test_engine_error_is_forwarded_once_and_ends_the_request():
    sink = FakeSink()
    stream = [FakeResponse(("a",)), FakeResponse(error="boom"), FakeResponse(("late",))]
    assert Relay("r", sink, lambda: iter(stream), never_cancel).run() == ERROR
    assert sink.events == [("data", ("a",)), ("engine-error", "boom")]


def test_target_that_refuses_the_request():
    def start():
        raise RuntimeError("model 'tensorrt_llm' is not ready")

    sink = FakeSink()
    assert Relay("r", sink, start, never_cancel).run() == ERROR
    assert sink.events == [("fail", "INTERNAL")]


def test_broken_stream_fails_the_request():
    def stream():
        yield FakeResponse(("a",))
        raise RuntimeError("stub died")

    sink = FakeSink()
    assert Relay("r", sink, stream, never_cancel).run() == ERROR
    assert sink.events == [("data", ("a",)), ("fail", "INTERNAL")]


def test_cancel_before_start_never_calls_the_engine():
    sink = FakeSink()
    relay = Relay("r", sink, lambda: pytest.fail("started a cancelled request"), never_cancel)
    relay.cancel()
    assert relay.run() == CANCELLED and sink.events == [("fail", "CANCELLED")]


def test_cancel_mid_stream_cancels_the_engine_request_and_drains():
    sink, stream, cancelled = FakeSink(), QueueStream(), []

    def cancel_stream(request_id, s):
        cancelled.append((request_id, s))
        stream.q.put(FakeResponse(("after-cancel",)))  # the engine may still emit one step
        stream.q.put(END)  # then ends the request (TensorRT-LLM: a final response)

    relay = Relay("relay-1", sink, lambda: stream, cancel_stream)
    result = []
    worker = threading.Thread(target=lambda: result.append(relay.run()))
    worker.start()
    stream.q.put(FakeResponse(("a",)))
    while not sink.events:
        time.sleep(0.01)
    relay.cancel()
    relay.cancel()  # idempotent
    worker.join(5)
    assert result == [CANCELLED] and cancelled == [("relay-1", stream)]
    assert sink.events == [("data", ("a",)), ("fail", "CANCELLED")]  # nothing forwarded after the cancel


def test_watcher_cancels_relays_whose_client_went_away():
    sink, stream, cancelled = FakeSink(), QueueStream(), threading.Event()

    def cancel_stream(request_id, s):
        cancelled.set()
        s.q.put(END)

    pool = RelayPool(max_workers=2, cancel_period_s=0.02,
                     on_done=lambda relay, outcome, seconds: done.put(outcome))
    done = queue.Queue()
    try:
        pool.submit(Relay("r", sink, lambda: stream, cancel_stream))
        stream.q.put(FakeResponse(("a",)))
        sink.client_gone = True
        assert cancelled.wait(5)
        assert done.get(timeout=5) == CANCELLED
    finally:
        pool.shutdown()


def test_watcher_check_once_ignores_live_and_already_cancelled_relays():
    watcher = CancelWatcher(period_s=60)
    try:
        live, gone = FakeSink(), FakeSink()
        gone.client_gone = True
        calls = []
        relays = [Relay(n, s, lambda: iter(()), lambda rid, st: calls.append(rid)) for n, s in (("live", live), ("gone", gone))]
        for r in relays:
            watcher.add(r)
        assert watcher.check_once() == 1 and relays[1].cancelled and not relays[0].cancelled
        assert watcher.check_once() == 0  # not cancelled twice
        assert calls == []  # no stream yet: cancelled before start
    finally:
        watcher.stop()


def test_relay_contract_names():
    assert "detokenize_params" not in FORWARDED_INPUTS and "stop" not in FORWARDED_INPUTS
    assert REQUESTED_OUTPUTS[:4] == ("output_ids", "sequence_length", "cum_log_probs", "output_log_probs")
    assert {"batch_index", "sequence_index", "kv_cache_reused_blocks", "context_logits"} <= set(REQUESTED_OUTPUTS)
    stop = stop_request_arrays()
    assert set(stop) == {"input_ids", "input_lengths", "request_output_len", "stop"} and bool(stop["stop"][0, 0])


def test_llm_bls_dataflow_helpers():
    import numpy as np

    from model_repository.engines.relay.bls_pipeline import client_outputs, engine_request, postprocessing_request

    pre = {"input_ids": np.array([[1, 2], [3, 0]]), "input_lengths": np.array([[2], [1]]),
           "detokenize_params": np.array([[b"row0"], [b"row1"]], dtype=object)}
    client = {"text_input": np.array([[b"a"], [b"b"]], dtype=object), "length_penalty": np.ones((2, 1), np.float32)}
    engine, params = engine_request(pre, client)
    assert set(engine) == {"input_ids", "input_lengths", "len_penalty"} and params is pre["detokenize_params"]
    response = {"output_ids": np.array([[[5]]]), "sequence_length": np.array([[1]]), "cum_log_probs": np.array([[0.0]]),
                "batch_index": np.array([[1]], dtype=np.int32)}
    post_request = postprocessing_request(response, params)
    assert set(post_request) == {"output_ids", "sequence_length", "detokenize_params"}
    assert post_request["detokenize_params"].tolist() == [[b"row1"]]  # the response's own prompt
    post = {"text_output": 1, "num_input_tokens": 2, "num_output_tokens": 3, "finish_reason": 4}
    out = client_outputs(response, post)
    # output_log_probs was not sent; sequence_index is always there
    assert set(out) == set(post) | {"output_ids", "cum_log_probs", "batch_index", "sequence_index"}


def test_relayed_tensorrt_llm_responses_keep_our_contract():
    import numpy as np

    from model_repository.engines.relay.bls_pipeline import closing_response, new_log_probs, relay_outputs, sequence_of

    # TensorRT-LLM streams every log prob so far; our responses carry this response's own.
    engine = {"output_ids": np.array([[[7, 8]]]), "sequence_length": np.array([[2]]),
              "output_log_probs": np.array([[[-0.125, -0.25, -0.5, -0.75]]], dtype=np.float32)}
    assert new_log_probs(engine, streaming=True)["output_log_probs"].tolist() == [[[-0.5, -0.75]]]
    assert new_log_probs(engine, streaming=False) is engine
    closing = closing_response(1)
    assert closing["output_ids"].shape == (1, 1, 0) and closing["batch_index"].tolist() == [[1]]
    echo = np.array([[b"row0"], [b"row1"]], dtype=object)
    out = relay_outputs(closing, echo)
    assert out["detokenize_params"].tolist() == [[b"row1"]] and out["sequence_index"].tolist() == [[0]]
    # several samples: each stream gets its own closing response (row output.sequence_results)
    closing = closing_response(1, 2)
    assert relay_outputs(closing, echo)["sequence_index"].tolist() == [[2]] and sequence_of(closing) == 2
    assert sequence_of({"output_ids": np.zeros((1, 1, 1))}) == 0  # left out by upstream for one sequence


@pytest.mark.parametrize("message,code", [
    ("Executor failed process requestId 3 due to the following error: Maximum queue size of 8 has been reached, "
     "please try again later", "UNAVAILABLE"),
    ("[request id: abc] Exceeds maximum queue size", "UNAVAILABLE"),
    ("Encountered an error when fetching new request: Prompt length (600) exceeds maximum input length (512)", "INTERNAL"),
    ("[INVALID_ARG] 'bad_words_list' asks for bad words", None),
])
def test_engine_errors_reach_clients_with_our_codes(message, code):
    from model_repository.engines.relay.engine_errors import classify

    got, text = classify(message)
    assert got == code and (message in text)
    if code == "UNAVAILABLE":
        assert "retry later" in text
