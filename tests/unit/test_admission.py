"""Priority admission with aging (no engine)."""

from __future__ import annotations

import pytest

from contract import params
from model_repository.engine_step.admission import AgingQueue


def test_higher_priority_first_then_fifo():
    q: AgingQueue[str] = AgingQueue(aging_per_s=0.0)
    q.push("low-a", 0.0, 0.1)
    q.push("low-b", 0.0, 0.1)
    q.push("high", 0.0, 0.9)
    assert [q.pop(0.0) for _ in range(3)] == ["high", "low-a", "low-b"]


def test_aging_lets_an_old_low_priority_request_overtake_a_new_high_one():
    q: AgingQueue[str] = AgingQueue(aging_per_s=0.1)
    q.push("old-low", 0.0, 0.0)
    q.push("new-high", 11.0, 1.0)
    assert q.pop(11.0) == "old-low"  # 0.0 + 1.1 > 1.0


def test_no_starvation_under_a_stream_of_high_priority_requests():
    q: AgingQueue[str] = AgingQueue(aging_per_s=0.1)
    q.push("low", 0.0, 0.0)
    admitted = []
    for t in range(30):  # one new high-priority request per second, one admission per second
        q.push(f"high-{t}", float(t), 1.0)
        admitted.append(q.pop(float(t)))
    assert "low" in admitted


def test_out_of_range_priority_names_the_field():
    with pytest.raises(ValueError, match="'priority'"):
        params.check("priority", 1.5)
    with pytest.raises(IndexError):
        AgingQueue().pop(0.0)


def test_pop_among_the_eligible_only():
    q: AgingQueue[str] = AgingQueue(aging_per_s=0.0)
    q.push("low", 0.0, 0.1)
    assert q.pop(0.0, lambda p: p >= 0.5) is None and len(q) == 1
    q.push("high", 0.0, 0.9)
    assert q.pop(0.0, lambda p: p >= 0.5) == "high"
