"""Request priorities on the CPU engine, live: with the engine full (max_num_seqs 1 here), a
later high-priority request is served before an earlier low-priority one; without
priorities the order is arrival order.  Aging (nothing starves) is unit-tested with the
runner's fakes (tests/unit/test_runner.py); it is off here so the order is exact."""

from __future__ import annotations

import threading
import time

import pytest
from build_engines.render import copy_repository
from contract import names
from client import InvalidRequestError, LlmClient, SamplingParams

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture(scope="module")
def one_seat_server(repository, serve, tmp_path_factory):
    dest = tmp_path_factory.mktemp("priorities") / "repository"
    return serve(copy_repository(repository, dest, names.OPENVINO_ENGINE,
                                 {"max_num_seqs": "1", "priority_aging_per_s": "0"}))


def _first_token_order(url: str, priorities: tuple[float | None, float | None]) -> list[str]:
    """Hold the one seat with a long request, queue 'early' then 'late' behind it; the order
    in which their first tokens arrive."""
    order: list[str] = []
    lock = threading.Lock()

    def run(name: str, priority: float | None, started: threading.Event | None = None) -> None:
        with LlmClient(url) as client:
            sampling = SamplingParams(max_tokens=4, temperature=0.0, priority=priority)
            for _ in client.stream(f"Say {name}.", sampling):
                with lock:
                    order.append(name)
                break

    with LlmClient(url) as client:
        holder = client.stream("Tell me a long story.", SamplingParams(max_tokens=160, min_tokens=160, temperature=0.0))
        next(holder)  # the seat is taken
        threads = []
        for name, priority in zip(("early", "late"), priorities):
            t = threading.Thread(target=run, args=(name, priority))
            t.start()
            threads.append(t)
            time.sleep(0.3)  # arrival order: early, then late
        for _ in holder:
            pass
        for t in threads:
            t.join(60)
    return order


def test_a_later_high_priority_request_is_served_first(one_seat_server):
    url = one_seat_server.settings.grpc_url
    assert _first_token_order(url, (None, None)) == ["early", "late"]  # FIFO without priorities
    assert _first_token_order(url, (0.1, 0.9)) == ["late", "early"]


def test_a_priority_out_of_range_is_refused_by_the_server(one_seat_server):
    import numpy as np
    import tritonclient.grpc as grpcclient

    from client.request_builder import build_inputs

    inputs = build_inputs("Hi", SamplingParams(max_tokens=2), stream=False)
    bad = grpcclient.InferInput("priority", [1, 1], "FP32")
    bad.set_data_from_numpy(np.array([[1.5]], dtype=np.float32))
    client = grpcclient.InferenceServerClient(one_seat_server.settings.grpc_url.removeprefix("grpc://"))
    errors: list[str] = []
    client.start_stream(callback=lambda result, error: errors.append(str(error)) if error else None)
    client.async_stream_infer("ensemble", inputs + [bad])
    deadline = time.monotonic() + 30
    while not errors and time.monotonic() < deadline:
        time.sleep(0.1)
    client.stop_stream()
    assert errors and "invalid 'priority': 1.5 is outside the allowed range [0, 1]" in errors[0]
    with LlmClient(one_seat_server.settings.grpc_url) as ok, pytest.raises(InvalidRequestError, match="priority"):
        ok.generate("Hi", SamplingParams(max_tokens=2, priority=-1.0))  # the client checks too
