"""The CPU engine's stop protocol: stop=true with a running request's id cancels it and
ends it with a final response, as TensorRT-LLM does."""

from model_repository.cpu_engine.stop_registry import StopRegistry


class Sink:
    def __init__(self):
        self.events = []

    def is_cancelled(self):
        return False

    def send(self, ids, log_probs, cum_log_prob, final):
        self.events.append(("send", tuple(ids), final))

    def fail(self, message, *, cancelled=False):
        self.events.append(("fail", cancelled))


def test_stop_marks_the_request_and_ends_it_with_a_final_response():
    registry, inner = StopRegistry(), Sink()
    sink = registry.register("req-1", inner)
    assert not sink.is_cancelled()
    assert registry.stop("req-1") and sink.is_cancelled()
    sink.fail("cancelled", cancelled=True)  # what the runner does for a cancelled request
    assert inner.events == [("send", (), True)]
    assert not registry.stop("req-1")  # finished requests are forgotten


def test_client_cancellation_still_reports_cancelled():
    registry, inner = StopRegistry(), Sink()
    sink = registry.register("req-2", inner)
    sink.fail("cancelled", cancelled=True)
    assert inner.events == [("fail", True)]


def test_requests_without_id_are_not_tracked_and_finals_forget():
    registry, inner = StopRegistry(), Sink()
    assert registry.register("", inner) is inner
    sink = registry.register("req-3", inner)
    sink.send([5], [0.0], 0.0, True)
    assert not registry.stop("req-3") and not registry.stop("unknown")
