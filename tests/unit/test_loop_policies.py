"""The policies the three engine loops share (model_repository/engine_step/loop_policies.py)."""

from model_repository.engine_step import loop_policies
from model_repository.engine_step.loop_policies import (
    FailCode,
    FirstTokenDeadline,
    is_stopped,
    polled_ending,
    stream_due,
)
from model_repository.engine_step.runner import FailCode as RunnerFailCode


def test_the_first_token_deadline_and_its_message():
    deadline = FirstTokenDeadline(5.0)
    assert not deadline.overdue(arrived=10.0, now=15.0) and deadline.overdue(arrived=10.0, now=15.5)
    assert not FirstTokenDeadline(None).overdue(0.0, 1e9)  # no deadline: waits as long as it takes
    assert deadline.message(10.0, 16.4) == "no first token after 6s in the queue; the server is overloaded, retry later"
    assert FirstTokenDeadline(5.0, where="").message(10.0, 16.4) == (
        "no first token after 6s; the server is overloaded, retry later"
    )


def test_a_poll_ends_a_cancelled_request_first_then_one_past_its_deadline_without_a_token():
    deadline = FirstTokenDeadline(1.0)
    assert polled_ending(True, False, 0.0, 5.0, deadline) == ("cancelled", FailCode.CANCELLED)
    assert polled_ending(True, True, 0.0, 0.5, deadline) == ("cancelled", FailCode.CANCELLED)
    ending = polled_ending(False, False, 0.0, 5.0, deadline)
    assert ending is not None and ending[1] is FailCode.UNAVAILABLE and ending[0].startswith("no first token after 5s")
    assert polled_ending(False, True, 0.0, 5.0, deadline) is None  # it has its first token
    assert polled_ending(False, False, 0.0, 0.5, deadline) is None


def test_a_stop_names_only_requests_with_an_id():
    assert is_stopped("a", {"a", "b"}) and not is_stopped("c", {"a"})
    assert not is_stopped("", {""})


def test_the_first_streamed_token_goes_at_once_then_every_interval():
    assert stream_due(1, 0, 4) and stream_due(3, 0, 4)  # nothing sent yet
    assert not stream_due(3, 1, 4) and stream_due(4, 1, 4)
    assert not stream_due(0, 0, 1) and stream_due(1, 5, 1)


def test_one_fail_code_and_a_paragraph_per_policy():
    assert RunnerFailCode is FailCode  # the sinks' import path stays
    doc = loop_policies.__doc__ or ""
    for policy in ("Cancellation polling.", "Stop by request id.", "Stream cadence and closing."):
        assert policy in doc
