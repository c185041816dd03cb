"""The OpenAI front's own /metrics (openai_front/metrics.py) and its liveness route, on the
real app with no Triton behind it (authentication and liveness need none)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from openai_front.app import FrontSettings, create_app
from openai_front.metrics import DURATION, DURATION_BUCKETS, FrontMetrics, IN_FLIGHT, REQUESTS


@pytest.fixture()
def client():
    settings = FrontSettings(grpc_url="127.0.0.1:1", api_key="k", max_body_bytes=100)
    with TestClient(create_app(settings)) as c:
        yield c


def _samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def test_metrics_count_requests_by_route_and_status(client):
    assert client.get("/live").json() == {"status": "ok"}
    assert client.get("/v1/models").status_code == 401
    assert client.get("/v1/models", headers={"Authorization": "Bearer k"}).status_code == 200
    assert client.post("/v1/completions", content=b"x" * 200, headers={"content-length": "200"}).status_code == 413
    assert client.get("/nope").status_code == 404
    scrape = client.get("/metrics")
    assert scrape.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(scrape.text)
    assert samples[f'{REQUESTS}{{route="/v1/models",code="401"}}'] == 1
    assert samples[f'{REQUESTS}{{route="/v1/models",code="200"}}'] == 1
    assert samples[f'{REQUESTS}{{route="/v1/completions",code="413"}}'] == 1
    assert samples[f'{REQUESTS}{{route="other",code="404"}}'] == 1
    assert samples[f'{IN_FLIGHT}{{route="/v1/models"}}'] == 0
    assert samples[f'{DURATION}_count{{route="/v1/models"}}'] == 2
    assert not any("/metrics" in key for key in samples)  # the scrape does not count itself


def test_histogram_buckets_are_cumulative():
    metrics = FrontMetrics()
    for seconds in (0.01, 0.2, 7.0, 1000.0):
        metrics.started("/v1/completions")
        metrics.finished("/v1/completions", 200, seconds)
    samples = _samples(metrics.exposition())
    bucket = lambda le: samples[f'{DURATION}_bucket{{route="/v1/completions",le="{le}"}}']  # noqa: E731
    assert bucket(DURATION_BUCKETS[0]) == 1 and bucket(0.25) == 2 and bucket(10.0) == 3 and bucket("+Inf") == 4
    assert samples[f'{DURATION}_sum{{route="/v1/completions"}}'] == pytest.approx(1007.21)
