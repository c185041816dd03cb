"""Two CPU servers, load on one: the gauges a load-aware router reads (the Gateway API
Inference Extension's endpoint picker: queued requests, running requests, KV-cache
utilisation, under their standard TensorRT-LLM names and ours) move on the loaded server and
stay at rest on the idle one, so a picker would send the next request to the idle one."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from google.protobuf import text_format

from build_engines.render import read_config
from build_engines.repository import render_repository
from client import AsyncLlmClient, ChatMessage, SamplingParams
from contract import metrics as m
from contract import names
from serving import prometheus

pytestmark = pytest.mark.server

BATCH = 2  # max_num_seqs per server, so that 6 requests queue
REQUESTS = 6


@pytest.fixture(scope="module")
def two_servers(default_engine, tmp_path_factory, serve):
    repository = tmp_path_factory.mktemp("picker") / "repository"
    render_repository(default_engine, repository)
    path = repository / names.OPENVINO_ENGINE / "config.pbtxt"
    config = read_config(path)
    config.parameters["max_num_seqs"].string_value = str(BATCH)
    path.write_text(text_format.MessageToString(config))
    return serve(repository), serve(repository)


def gauges(server) -> dict[str, float]:
    samples = prometheus.scrape(server.settings.metrics_url)
    ours = {spec.name: prometheus.value(samples, spec.name) for spec in (m.REQUESTS_WAITING, m.REQUESTS_RUNNING, m.KV_CACHE_USAGE)}
    standard = {alias.selector: prometheus.value(samples, alias.spec.name, **{alias.label: alias.value})
                for alias in m.GAUGE_ALIASES.values()}
    return ours | standard


def test_picker_gauges_move_with_load_on_each_server(two_servers):
    busy, idle = two_servers
    time.sleep(0.6)
    assert gauges(busy)[m.REQUESTS_RUNNING.name] == 0 and gauges(idle)[m.REQUESTS_RUNNING.name] == 0

    async def load():
        async with AsyncLlmClient(busy.settings.grpc_url) as c:
            await asyncio.gather(*(c.generate([ChatMessage("user", f"Write a long story number {i}.")],
                                              SamplingParams(max_tokens=160, min_tokens=160)) for i in range(REQUESTS)))

    runner = threading.Thread(target=lambda: asyncio.run(load()))
    runner.start()
    peak_busy: dict[str, float] = {}
    peak_idle: dict[str, float] = {}
    while runner.is_alive():
        for peak, server in ((peak_busy, busy), (peak_idle, idle)):
            for name, v in gauges(server).items():
                peak[name] = max(peak.get(name, 0.0), v)
        time.sleep(0.1)
    runner.join()
    waiting = m.GAUGE_ALIASES[m.REQUESTS_WAITING.name].selector
    running = m.GAUGE_ALIASES[m.REQUESTS_RUNNING.name].selector
    kv = m.GAUGE_ALIASES[m.KV_CACHE_USAGE.name].selector
    print(f"loaded server peaks: {peak_busy}\nidle server peaks: {peak_idle}")
    # (OpenVINO's scheduler may batch past max_num_seqs with dynamic split-fuse: no exact counts)
    assert 1 <= peak_busy[running] <= REQUESTS and peak_busy[running] == peak_busy[m.REQUESTS_RUNNING.name]
    assert peak_busy[waiting] >= 1 and peak_busy[waiting] == peak_busy[m.REQUESTS_WAITING.name]
    assert 0 < peak_busy[kv] <= 1 and peak_busy[kv] == peak_busy[m.KV_CACHE_USAGE.name]
    assert peak_idle[running] == peak_idle[waiting] == peak_idle[kv] == 0
    time.sleep(0.6)  # published every 0.25 s: back at rest
    after = gauges(busy)
    assert after[running] == after[waiting] == 0
