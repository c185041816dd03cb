"""`make bench`: the served ensemble under Triton's own load tools, side by side with the
baselines - the engine alone in-process, one request at a time, and `transformers serve` -
all on the same checkpoint and workload, in one run."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from serving import prometheus
from bench.cost import Pricing
from bench.cpu_account import CpuAccount
from bench.environments import BUILD, ROOT, ensure_venv
from bench.genai_perf import Endpoint, Load, RunResult, Slo, Target, Workload, run
from bench.http_load import run_http
from bench.offline import engine_parameters, run_offline
from bench.peer import PeerServer
from bench.report import write
from build_engines.render import read_config
from contract import metrics, names
from contract.build_record import BuildRecord
from serving.launcher import ServerSettings, TritonServer, free_loopback_port
from serving.openai_process import OpenAiFront, served_model_name


@dataclass(frozen=True)
class SuiteConfig:
    repository: Path = BUILD / "repository"
    out: Path = BUILD / "bench" / "report"
    slo: Slo = Slo(ttft_s=1.0, itl_s=0.06)
    input_tokens: int = 128
    output_tokens: int = 128
    concurrency: tuple[int, ...] = (1, 4, 16)
    request_rates: tuple[float, ...] = (1.0, 2.0, 4.0)
    peer: bool = True
    pricing: Pricing | None = None  # $/1M output tokens in the report when set
    notes: list[str] = field(default_factory=list)


def _engine_dir(repository: Path) -> Path:
    config = read_config(repository / names.PREPROCESSING / "config.pbtxt")
    return Path(config.parameters["tokenizer_dir"].string_value)


def _server_counters(url: str) -> dict[str, float]:
    samples = prometheus.scrape(url)
    return {name: prometheus.value(samples, name) for name in (
        metrics.GENERATED_TOKENS.name, f"{metrics.TIME_TO_FIRST_TOKEN.name}_sum", f"{metrics.TIME_TO_FIRST_TOKEN.name}_count",
        f"{metrics.INTER_TOKEN_LATENCY.name}_sum", f"{metrics.INTER_TOKEN_LATENCY.name}_count")}


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")


def run_suite(config: SuiteConfig) -> Path:
    t_start = time.monotonic()
    tools = ensure_venv("bench-tools", ROOT / "requirements" / "bench-tools.lock")
    peer_venv = ensure_venv("peer-venv", ROOT / "requirements" / "peer.lock") if config.peer else None
    engine_dir = _engine_dir(config.repository)
    record = BuildRecord.read(engine_dir)
    runs_dir = config.out / "runs"
    fixed = Workload(f"isl{config.input_tokens}-osl{config.output_tokens}", config.input_tokens, config.output_tokens)
    # ShareGPT-like: varied prompt and answer lengths (normal, sd = mean / 4: no empty prompt).
    mixed = Workload("mixed", 2 * config.input_tokens, config.output_tokens, config.input_tokens // 2,
                     config.output_tokens // 4)
    chat = replace(fixed, name=f"chat-{fixed.name}")
    results: list[RunResult] = []

    def measure(target: Target, workload: Workload, load: Load) -> RunResult:
        result = run(tools, target, workload, load, engine_dir, runs_dir / f"{target.name}-{workload.name}-{load.label}",
                     config.slo)
        results.append(result)
        print(f"  {target.name:18} {workload.name:16} {load.label:>4}: {result.output_tokens_per_s:7.1f} tok/s  "
              f"TTFT p50 {result.ttft_s['p50'] * 1000:6.0f} ms  ITL p50 {result.itl_s['p50'] * 1000:5.1f} ms  "
              f"goodput {result.goodput_rps:.2f} req/s", flush=True)
        return result

    settings = ServerSettings.on_free_ports(config.repository, config.out / "tritonserver.log")
    with TritonServer(settings) as server:
        front = OpenAiFront(settings.grpc_url, settings.host, free_loopback_port(), served_model_name(config.repository),
                            config.out / "openai_front.log")
        front.start()
        try:
            triton = Target("triton-ensemble", Endpoint.TRITON, settings.grpc_url, names.ENSEMBLE,
                            (("min_tokens", config.output_tokens),))
            before = _server_counters(settings.metrics_url)
            for c in config.concurrency:  # ascending: the account kept is the top level's
                with CpuAccount(server.process.pid) as account:
                    measure(triton, fixed, Load("concurrency", c))
            for rate in config.request_rates:
                measure(triton, fixed, Load("request-rate", rate))
            after = _server_counters(settings.metrics_url)
            measure(replace(triton, extra_inputs=()), mixed, Load("concurrency", max(config.concurrency)))
            top = max(config.concurrency)
            served = next(r for r in results if r.target == "triton-ensemble" and r.load == f"c{top}" and r.workload == fixed.name)
            texts = _texts(Path(served.artifacts))
            ours_http = http(config, "ours-openai-front", front.url + "/v1", served_model_name(config.repository), texts, chat)
            results.append(ours_http)
        finally:
            front.stop()

    one = next(r for r in results if r.target == "triton-ensemble" and r.load == "c1" and r.workload == fixed.name)
    prompts = _prompts(Path(served.artifacts), engine_dir)[: Load("concurrency", top).request_count]  # those it sent
    offline = run_offline(engine_parameters(config.repository), prompts, config.output_tokens, top)
    print(f"  {'offline engine':18} {fixed.name:16} {'c%d' % top:>4}: {offline.output_tokens_per_s:7.1f} tok/s", flush=True)

    peer = None
    if peer_venv is not None:
        with PeerServer(peer_venv, Path(record.spec["checkpoint"]), free_loopback_port(), config.out / "transformers_serve.log") as server:
            peer = http(config, f"transformers-serve-{server.dtype}", server.url + "/v1", server.model, texts, chat)
            results.append(peer)

    ratios = [
        f"served / offline engine at concurrency {top}: **{_ratio(served.output_tokens_per_s, offline.output_tokens_per_s)}x** "
        f"({served.output_tokens_per_s:.0f} vs {offline.output_tokens_per_s:.0f} output tok/s; target >= 0.9); CPU during "
        f"the served run: {account.summary()} (the in-process engine has the whole machine)",
        f"in-flight batching: concurrency {top} / concurrency 1: **{_ratio(served.output_tokens_per_s, one.output_tokens_per_s)}x** "
        f"({served.output_tokens_per_s:.0f} vs {one.output_tokens_per_s:.0f} output tok/s)",
    ]
    if peer is not None:
        ratios.append(
            f"ours (OpenAI front) / transformers serve ({peer.target.rsplit('-', 1)[-1]}) at concurrency {top}: **{_ratio(ours_http.output_tokens_per_s, peer.output_tokens_per_s)}x** "
            f"output tok/s ({ours_http.output_tokens_per_s:.0f} vs {peer.output_tokens_per_s:.0f}; target >= 3); p99 TTFT "
            f"{ours_http.ttft_s['p99'] * 1000:.0f} ms vs {peer.ttft_s['p99'] * 1000:.0f} ms")
    tokens = after[metrics.GENERATED_TOKENS.name] - before[metrics.GENERATED_TOKENS.name]
    ttft_n = after[f"{metrics.TIME_TO_FIRST_TOKEN.name}_count"] - before[f"{metrics.TIME_TO_FIRST_TOKEN.name}_count"]
    ttft_sum = after[f"{metrics.TIME_TO_FIRST_TOKEN.name}_sum"] - before[f"{metrics.TIME_TO_FIRST_TOKEN.name}_sum"]
    ratios.append(f"server-side metrics over the fixed-length sweep: {tokens:.0f} tokens generated, mean engine TTFT "
                  f"{ttft_sum / ttft_n * 1000:.0f} ms over {ttft_n:.0f} requests" if ttft_n else "no server-side metrics")
    summary = {
        "model": Path(record.spec["checkpoint"]).name, "engine": f"{record.backend} {record.spec['precision']}",
        "machine": f"{platform.machine()}, {_cpus()} CPUs, {platform.python_version()}",
        "slo": {"ttft_ms": config.slo.ttft_s * 1000, "itl_ms": config.slo.itl_s * 1000},
        "workload": fixed.name, "ratios": ratios, "offline": offline.__dict__,
        "seconds": round(time.monotonic() - t_start, 1),
    }
    return write(config.out, summary, results, config.notes, config.pricing)


def http(config: SuiteConfig, name: str, base_url: str, model: str, texts: list[str], workload: Workload) -> RunResult:
    """HTTP-to-HTTP: the same client, prompts and max_tokens for our front and the peer."""
    top = max(config.concurrency)
    run_http(name, base_url, model, texts[:2], config.output_tokens, 2, config.slo, workload.name)  # warm-up
    result = run_http(name, base_url, model, texts[: 3 * top], config.output_tokens, top, config.slo, workload.name)
    print(f"  {name:18} {workload.name:16} {result.load:>4}: {result.output_tokens_per_s:7.1f} tok/s  "
          f"TTFT p50 {result.ttft_s['p50'] * 1000:6.0f} ms  ITL p50 {result.itl_s['p50'] * 1000:5.1f} ms", flush=True)
    return result


def _texts(artifacts: Path) -> list[str]:
    return [entry["text_input"][0] for entry in json.loads((artifacts / "inputs.json").read_text())["data"]]


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def _prompts(artifacts: Path, engine_dir: Path) -> list[list[int]]:
    """The exact prompts genai-perf sent, tokenized as preprocessing does."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(engine_dir))
    return [tok.encode(text) for text in _texts(artifacts)]
