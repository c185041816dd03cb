"""Many concurrent short streams through both entry models, a share of the clients leaving
early or timing out, on both repository layouts: the server must survive (same process, no
fatal signal in its log) and every request must end with an answer or a clear error.

Before model_repository/triton/response_channel.py, tensorrt_llm_bls took tritonserver down with SIGSEGV
(`TRITONBACKEND_ResponseFactoryIsCancelled`) within the first ~30 requests of this load."""

from __future__ import annotations

import pytest

from bench.stress import ABANDONED, COMPLETED, ServerWatch, StressPlan, run_stress
from contract import names
from tests.integration.conftest import LAYOUTS

pytestmark = [pytest.mark.server, pytest.mark.slow]

PLAN = StressPlan(models=(names.ENSEMBLE, names.LLM_BLS), requests_per_model=80, concurrency=12)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_server_survives_short_streams_abandoned_and_timed_out(layout, request):
    server = request.getfixturevalue(layout)
    watch = ServerWatch.of(server.process.pid, server.settings.log_file)
    report = run_stress(server.settings.grpc_url, PLAN)
    assert watch.problems() == []
    assert report.unexpected == []
    for model in PLAN.models:  # the load did what it is for on each entry model
        assert report.outcomes[(model, COMPLETED)] > PLAN.requests_per_model / 2
        assert report.outcomes[(model, ABANDONED)] > 0
    assert server.is_ready()
