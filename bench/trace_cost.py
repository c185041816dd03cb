"""The throughput cost of tracing (issue 38, docs/tracing.md), measured as DESIGN.md section 6
asks: two servers of the same repository, one untraced and one traced at the default sampling
ratio (Triton's own spans + our models' spans, exported over OTLP/HTTP to a receiver in its own
process that reads and discards them), loaded in turn (A, B, B, A, A, B, ...) by a light in-process
asyncio gRPC client at the same concurrency; the ratio of each pair is reported.

    python -m bench.trace_cost --engine build/engines/SmolLM2-135M-Instruct-openvino-int8 \\
        --concurrency 16 --rounds 3 [--model tensorrt_llm_bls]
"""

from __future__ import annotations

import asyncio
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from bench.environments import DEFAULT_ENGINE
from bench.feature_cost import PROMPTS
from client import AsyncLlmClient, SamplingParams
from contract import names
from contract.telemetry import DEFAULT_SAMPLE_RATIO, TraceSettings
from serving.launcher import DEFAULT_SERVER_DIR, ServerSettings, TritonServer, free_loopback_port

# A receiver in its own process (the collector's work is not the server's): reads, answers 200.
DISCARD_RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


async def _throughput(url: str, model: str, concurrency: int, requests: int, max_tokens: int) -> float:
    """Output tokens per second of `requests` streamed requests, `concurrency` at a time."""
    sampling = SamplingParams(max_tokens=max_tokens, min_tokens=max_tokens, temperature=1.0, seed=1)
    async with AsyncLlmClient(url, model) as client:
        queue = list(range(requests))
        tokens = 0

        async def worker():
            nonlocal tokens
            while queue:
                i = queue.pop()
                result = await client.generate(PROMPTS[i % len(PROMPTS)], sampling)
                tokens += result.completion_tokens

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return tokens / (time.monotonic() - t0)


@click.command()
@click.option(
    "--engine",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=DEFAULT_ENGINE,
    show_default=True,
)
@click.option("--model", default=names.ENSEMBLE, show_default=True, help="ensemble or tensorrt_llm_bls")
@click.option("--concurrency", default=16, show_default=True)
@click.option("--requests", default=48, show_default=True)
@click.option("--max-tokens", default=128, show_default=True)
@click.option("--rounds", default=3, show_default=True)
@click.option("--ratio", type=float, default=DEFAULT_SAMPLE_RATIO, show_default=True, help="The traced side's ratio.")
def main(engine: Path, model: str, concurrency: int, requests: int, max_tokens: int, rounds: int, ratio: float) -> None:
    from build_engines.repository import render_repository

    work = Path(tempfile.mkdtemp(prefix="trace-cost-"))
    repository = work / "repository"
    render_repository(engine, repository)
    port = free_loopback_port()
    receiver = subprocess.Popen([sys.executable, "-c", DISCARD_RECEIVER, str(port)])
    trace = TraceSettings(endpoint=f"http://127.0.0.1:{port}/v1/traces", sample_ratio=ratio)
    server_dir = DEFAULT_SERVER_DIR
    plain = ServerSettings.on_free_ports(repository, work / "plain.log", server_dir=server_dir)
    traced = ServerSettings.on_free_ports(repository, work / "traced.log", server_dir=server_dir, trace=trace)
    pairs = []
    try:
        with TritonServer(plain) as a, TritonServer(traced) as b:
            for url in (a.settings.grpc_url, b.settings.grpc_url):  # warm-up: first compiles, first spans
                asyncio.run(_throughput(url, model, concurrency, concurrency, 16))
            for r in range(rounds):  # A, B then B, A: neither side always runs first (drift cancels)
                run: dict[str, float] = {}
                for side in "ab" if r % 2 == 0 else "ba":
                    url = (a if side == "a" else b).settings.grpc_url
                    run[side] = asyncio.run(_throughput(url, model, concurrency, requests, max_tokens))
                ta, tb = run["a"], run["b"]
                pairs.append(
                    {
                        "round": r,
                        "untraced_tok_s": round(ta, 1),
                        "traced_tok_s": round(tb, 1),
                        "ratio_traced_over_untraced": round(tb / ta, 3),
                    }
                )
                click.echo(json.dumps(pairs[-1]))
    finally:
        receiver.terminate()
    ratios = [p["ratio_traced_over_untraced"] for p in pairs]
    click.echo(
        json.dumps(
            {
                "model": model,
                "concurrency": concurrency,
                "max_tokens": max_tokens,
                "requests": requests,
                "sample_ratio": ratio,
                "median_ratio": statistics.median(ratios),
                "ratios": ratios,
                "host": platform.processor() or platform.machine(),
            }
        )
    )


if __name__ == "__main__":
    main()
