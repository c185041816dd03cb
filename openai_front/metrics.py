"""The front's own Prometheus metrics on GET /metrics (text exposition format 0.0.4): requests
by route and status, requests in flight, and request duration (to the last byte: streams
included).  A small ASGI middleware; no client library, nothing global (one per app)."""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

REQUESTS = "openai_front_requests_total"
IN_FLIGHT = "openai_front_requests_in_flight"
DURATION = "openai_front_request_duration_seconds"
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
ROUTES = (
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/models",
    "/health",
)  # others count as "other"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class FrontMetrics:
    requests: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    in_flight: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    buckets: dict[str, list[int]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, route: str) -> None:
        with self.lock:
            self.in_flight[route] += 1

    def finished(self, route: str, status: int, seconds: float) -> None:
        with self.lock:
            self.in_flight[route] -= 1
            self.requests[(route, str(status))] += 1
            counts = self.buckets.setdefault(route, [0] * (len(DURATION_BUCKETS) + 1))
            counts[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
            self.sums[route] += seconds

    def exposition(self) -> str:
        with self.lock:
            lines = [f"# HELP {REQUESTS} HTTP requests by route and status code", f"# TYPE {REQUESTS} counter"]
            lines += [f'{REQUESTS}{{route="{r}",code="{c}"}} {n}' for (r, c), n in sorted(self.requests.items())]
            lines += [f"# HELP {IN_FLIGHT} HTTP requests being served", f"# TYPE {IN_FLIGHT} gauge"]
            lines += [f'{IN_FLIGHT}{{route="{r}"}} {n}' for r, n in sorted(self.in_flight.items())]
            lines += [f"# HELP {DURATION} Request arrival to the response's last byte", f"# TYPE {DURATION} histogram"]
            for route, counts in sorted(self.buckets.items()):
                total = 0
                for le, count in zip([*map(str, DURATION_BUCKETS), "+Inf"], counts):
                    total += count
                    lines.append(f'{DURATION}_bucket{{route="{route}",le="{le}"}} {total}')
                lines += [
                    f'{DURATION}_sum{{route="{route}"}} {self.sums[route]}',
                    f'{DURATION}_count{{route="{route}"}} {total}',
                ]
        return "\n".join(lines) + "\n"


class MetricsMiddleware:
    """Counts every HTTP request except the scrape itself; serves GET /metrics."""

    def __init__(self, app, metrics: FrontMetrics, path: str = "/metrics") -> None:
        self.app, self.metrics, self.path = app, metrics, path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == self.path and scope["method"] == "GET":
            return await self._scrape(send)
        route = scope["path"] if scope["path"] in ROUTES else "other"
        status = {"code": 500}
        start = time.perf_counter()

        async def sending(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        self.metrics.started(route)
        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.finished(route, status["code"], time.perf_counter() - start)

    async def _scrape(self, send) -> None:
        body = self.metrics.exposition().encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
