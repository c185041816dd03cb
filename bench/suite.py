"""`make bench`: the served ensemble under Triton's own load tools, side by side with the
baselines - the engine alone in-process, one request at a time, and the CPU peers (llama.cpp's
server, vLLM's CPU build, transformers serve) - all on the same checkpoint, in one run."""

from __future__ import annotations

import json
import platform
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench import aiperf, multiturn, peer_compare, perf_analyzer, pipeline_tax, priorities, speculative
from bench.cost import Pricing
from bench.cpu_account import CpuAccount
from bench.environments import BUILD, aiperf_venv
from bench.genai_perf import Endpoint, Load, RunResult, Slo, Target, Workload
from bench.http_load import run_http
from bench.offline import engine_parameters, run_offline
from bench.report import write
from build_engines.render import read_config
from contract import metrics, names
from contract.build_record import BuildRecord
from contract.model_configs import OpenVinoEngineParameters
from serving import prometheus
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
    peers: tuple[peer_compare.Peer, ...] = tuple(peer_compare.Peer)  # () : no peer comparison
    pricing: Pricing | None = None  # $/1M output tokens in the report when set
    gpu_hour_usd: float | None = None  # prices NVIDIA's published GPU figures beside ours
    aiperf: bool = True  # AIPerf sweeps of the HTTP streaming entry points (bench/aiperf.py)
    notes: list[str] = field(default_factory=list)


def engine_dir_of(repository: Path) -> Path:
    config = read_config(repository / names.PREPROCESSING / "config.pbtxt")
    return Path(config.parameters["tokenizer_dir"].string_value)


def _server_counters(url: str) -> dict[str, float]:
    samples = prometheus.scrape(url)
    return {
        name: prometheus.value(samples, name)
        for name in (
            metrics.GENERATED_TOKENS.name,
            f"{metrics.TIME_TO_FIRST_TOKEN.name}_sum",
            f"{metrics.TIME_TO_FIRST_TOKEN.name}_count",
            f"{metrics.INTER_TOKEN_LATENCY.name}_sum",
            f"{metrics.INTER_TOKEN_LATENCY.name}_count",
        )
    }


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("nan")


@dataclass
class _Suite:
    """What the suite's steps share: the config, the engine served, the workloads, and every
    load tool's result so far (the report's table)."""

    config: SuiteConfig
    tools: Path  # AIPerf's environment, and the corpus of perf_analyzer's prompts
    engine_dir: Path
    params: OpenVinoEngineParameters
    fixed: Workload
    mixed: Workload
    results: list[RunResult] = field(default_factory=list)

    @classmethod
    def of(cls, config: SuiteConfig) -> "_Suite":
        fixed = Workload(
            f"isl{config.input_tokens}-osl{config.output_tokens}", config.input_tokens, config.output_tokens
        )
        # ShareGPT-like: varied prompt and answer lengths (normal, sd = mean / 4: no empty prompt).
        mixed = Workload(
            "mixed", 2 * config.input_tokens, config.output_tokens, config.input_tokens // 2, config.output_tokens // 4
        )
        engine_dir = engine_dir_of(config.repository)
        return cls(config, aiperf_venv(), engine_dir, engine_parameters(config.repository), fixed, mixed)

    @property
    def runs_dir(self) -> Path:
        return self.config.out / "runs"

    @property
    def top(self) -> int:
        return max(self.config.concurrency)

    def measure(self, target: Target, workload: Workload, load: Load) -> RunResult:
        """One perf_analyzer run, kept and printed."""
        result = perf_analyzer.run(
            self.tools,
            target,
            workload,
            load,
            self.engine_dir,
            self.runs_dir / f"{target.name}-{workload.name}-{load.label}",
            self.config.slo,
        )
        self.results.append(result)
        print(
            f"  {target.name:18} {workload.name:16} {load.label:>4}: {result.output_tokens_per_s:7.1f} tok/s  "
            f"TTFT p50 {result.ttft_s['p50'] * 1000:6.0f} ms  ITL p50 {result.itl_s['p50'] * 1000:5.1f} ms  "
            f"goodput {result.goodput_rps:.2f} req/s",
            flush=True,
        )
        return result

    def ensemble_run(self, load: str) -> RunResult:
        """perf_analyzer's run of the ensemble on the fixed workload at `load` (c1, c16, ...)."""
        return next(
            r
            for r in self.results
            if r.target == "triton-ensemble" and r.load == load and r.workload == self.fixed.name
        )


@dataclass(frozen=True)
class _Served:
    """What the served steps measured beside the results table."""

    account: CpuAccount  # the server's CPU during the top concurrency level
    before: dict[str, float]  # the server's counters before and after the fixed-length sweep
    after: dict[str, float]
    tax: list  # pipeline_tax.measure's pairs
    aiperf_runs: list[RunResult]


def run_suite(config: SuiteConfig) -> Path:
    t_start = time.monotonic()
    suite = _Suite.of(config)
    served = _served_steps(suite)
    offline = _offline_engine(suite)
    sections = [
        *_aiperf_section(suite, served.aiperf_runs),
        *_peers_section(suite),
        _multiturn_section(config),
        _priorities_section(config),
        _speculative_section(suite),
    ]
    record = BuildRecord.read(suite.engine_dir)
    summary = {
        "model": Path(record.spec["checkpoint"]).name,
        "engine": f"{record.backend} {record.spec['precision']}",
        "machine": f"{platform.machine()}, {_cpus()} CPUs, {platform.python_version()}",
        "slo": {"ttft_ms": config.slo.ttft_s * 1000, "itl_ms": config.slo.itl_s * 1000},
        "workload": suite.fixed.name,
        "ratios": _ratios(suite, served, offline),
        "offline": offline.__dict__,
        "seconds": round(time.monotonic() - t_start, 1),
        "sections": sections,
    }
    return write(config.out, summary, suite.results, config.notes, config.pricing, config.gpu_hour_usd)


def _served_steps(suite: _Suite) -> _Served:
    """One server and the OpenAI front before it: perf_analyzer's sweeps of the ensemble (by
    concurrency, by request rate, the mixed workload), the front under the in-process HTTP
    client, the pipeline tax, and AIPerf's sweeps."""
    config = suite.config
    settings = ServerSettings.on_free_ports(config.repository, config.out / "tritonserver.log")
    with TritonServer(settings) as server:
        front = OpenAiFront(
            settings.grpc_url,
            settings.host,
            free_loopback_port(),
            served_model_name(config.repository),
            config.out / "openai_front.log",
        )
        front.start()
        try:
            triton = Target(
                "triton-ensemble",
                Endpoint.TRITON,
                settings.grpc_url,
                names.ENSEMBLE,
                (("min_tokens", config.output_tokens),),
            )
            before = _server_counters(settings.metrics_url)
            for c in config.concurrency:  # ascending: the account kept is the top level's
                with CpuAccount(server.pid) as account:
                    suite.measure(triton, suite.fixed, Load("concurrency", c))
            for rate in config.request_rates:
                suite.measure(triton, suite.fixed, Load("request-rate", rate))
            after = _server_counters(settings.metrics_url)
            suite.measure(replace(triton, extra_inputs=()), suite.mixed, Load("concurrency", suite.top))
            texts = _texts(Path(suite.ensemble_run(f"c{suite.top}").artifacts))
            chat = replace(suite.fixed, name=f"chat-{suite.fixed.name}")
            suite.results.append(
                http(config, "ours-openai-front", front.url + "/v1", served_model_name(config.repository), texts, chat)
            )
            tax = pipeline_tax.measure(
                settings.grpc_url, suite.params, suite.top, config.output_tokens, server_pid=server.pid
            )
            aiperf_runs = _aiperf_sweeps(config, front.url, settings.http_url, suite.engine_dir, suite.runs_dir)
            suite.results += aiperf_runs
        finally:
            front.stop()
    return _Served(account, before, after, tax, aiperf_runs)


def _offline_engine(suite: _Suite):
    """The engine alone in-process on the exact prompts perf_analyzer sent at the top level."""
    served = suite.ensemble_run(f"c{suite.top}")
    prompts = _prompts(Path(served.artifacts), suite.engine_dir)[: Load("concurrency", suite.top).request_count]
    offline = run_offline(suite.params, prompts, suite.config.output_tokens, suite.top)
    level = f"c{suite.top}"
    print(
        f"  {'offline engine':18} {suite.fixed.name:16} {level:>4}: {offline.output_tokens_per_s:7.1f} tok/s",
        flush=True,
    )
    return offline


def _aiperf_section(suite: _Suite, aiperf_runs: list[RunResult]) -> list[tuple[str, list[str]]]:
    if not aiperf_runs:
        return []
    return [
        (
            f"HTTP streaming sweeps ({aiperf.GENERATOR})",
            [
                f"Every figure in this table is {aiperf.GENERATOR}'s own (its profile_export_aiperf.json): the "
                "OpenAI front's "
                "/v1/chat/completions and Triton's HTTP generate_stream of the ensemble and the BLS (AIPerf's "
                "template "
                f"endpoint), streaming, {suite.fixed.name}, goodput against the SLO above. The gRPC rows of the table "
                "below come "
                "from perf_analyzer, the front's in-process row from bench.http_load: see its generator column.",
                "",
                *aiperf.markdown(aiperf_runs),
            ],
        )
    ]


def _peers_section(suite: _Suite) -> list[tuple[str, list[str]]]:
    config = suite.config
    if not config.peers:
        return []
    peers_out = config.out / "peers"
    peer_pairs, _ = peer_compare.run(
        peer_compare.with_exact(config.repository, peers_out),
        peers_out,
        config.peers,
        (1, suite.top),
        config.output_tokens,
        2,
        config.slo,
    )
    return [
        (
            "Against the CPU peers",
            [
                "One OpenAI streaming client for every server (not genai-perf), fixed-length answers, pairs (ours, "
                "peer) "
                "in alternating order, new prompts in every run (details: peers/peers.md).",
                "",
                *peer_compare.markdown(peer_pairs),
                "",
                *[f"- {v}" for v in peer_compare.verdicts(peer_pairs)],
                *[f"- {v}" for v in peer_compare.ours_ratios(peer_pairs)],
            ],
        )
    ]


def _multiturn_section(config: SuiteConfig) -> tuple[str, list[str]]:
    return (
        "Prefix caching: multi-turn chats",
        [
            "4 users at once, 4 turns each, one ~360-token system prompt shared by all, every turn resending the "
            "conversation; "
            "two servers (caching on / off) from this repository, 2 rounds each, alternating (details: "
            "multiturn/).",
            "",
            *multiturn.markdown(*multiturn.run(config.repository, config.out / "multiturn", 4, 4, 32, 2)),
        ],
    )


def _priorities_section(config: SuiteConfig) -> tuple[str, list[str]]:
    priority_mix = priorities.Workload()
    return (
        "Request priorities: interactive beside batch",
        [
            "One server (max_num_seqs 8), batch clients keeping more long generations in flight than it runs, "
            "interactive "
            "chats at random times; phases with priorities (interactive 0.9, batch 0.1) and without, alternating, "
            "2 each "
            "(`python -m bench priorities`; details: priorities/).",
            "",
            *priorities.markdown(
                priorities.run(config.repository, config.out / "priorities", priority_mix, 2, 8),
                config.slo.ttft_s,
                priority_mix,
                8,
            ),
        ],
    )


def _speculative_section(suite: _Suite) -> tuple[str, list[str]]:
    spec_pairs = speculative.measure(
        suite.params, _tokenizer(suite.engine_dir), (1, suite.top), suite.config.output_tokens, 2
    )
    return (
        "Speculative decoding: prompt lookup",
        [
            "Input-grounded prompts (repeat / rewrite a passage of the Python docs, copy given code), greedy, the "
            "engine's "
            "backend in-process, plain and prompt lookup alternating, new prompts every round (`python -m bench "
            "speculative`). "
            "Acceptance is estimated from tokens per engine step: (tokens per step - 1) / num_assistant_tokens.",
            "",
            *speculative.markdown(spec_pairs, suite.params.num_assistant_tokens),
        ],
    )


def _ratios(suite: _Suite, served_steps: _Served, offline) -> list[str]:
    """The report's headline ratios: the pipeline tax, served / offline, in-flight batching, and
    what the server's own metrics counted over the fixed-length sweep."""
    top, served, one = suite.top, suite.ensemble_run(f"c{suite.top}"), suite.ensemble_run("c1")
    before, after = served_steps.before, served_steps.after
    ratios = [
        pipeline_tax.summary(served_steps.tax) + "; target >= 0.9",
        f"served / offline engine at concurrency {top}, perf_analyzer as the load generator: "
        f"{_ratio(served.output_tokens_per_s, offline.output_tokens_per_s)}x "
        f"({served.output_tokens_per_s:.0f} vs {offline.output_tokens_per_s:.0f} output tok/s: the tools take CPU the "
        "engine "
        f"needs on a small host); CPU during the served run: {served_steps.account.summary()} (the in-process engine "
        "has the whole machine)",
        f"in-flight batching: concurrency {top} / concurrency 1: "
        f"**{_ratio(served.output_tokens_per_s, one.output_tokens_per_s)}x** "
        f"({served.output_tokens_per_s:.0f} vs {one.output_tokens_per_s:.0f} output tok/s)",
    ]
    tokens = after[metrics.GENERATED_TOKENS.name] - before[metrics.GENERATED_TOKENS.name]
    ttft_n = after[f"{metrics.TIME_TO_FIRST_TOKEN.name}_count"] - before[f"{metrics.TIME_TO_FIRST_TOKEN.name}_count"]
    ttft_sum = after[f"{metrics.TIME_TO_FIRST_TOKEN.name}_sum"] - before[f"{metrics.TIME_TO_FIRST_TOKEN.name}_sum"]
    ratios.append(
        f"server-side metrics over the fixed-length sweep: {tokens:.0f} tokens generated, mean engine TTFT "
        f"{ttft_sum / ttft_n * 1000:.0f} ms over {ttft_n:.0f} requests"
        if ttft_n
        else "no server-side metrics"
    )
    return ratios


def _aiperf_sweeps(
    config: SuiteConfig, openai_url: str, http_url: str, engine_dir: Path, runs_dir: Path
) -> list[RunResult]:
    if not config.aiperf:
        return []
    run_targets = aiperf.targets(
        openai_url, http_url, served_model_name(config.repository), (names.ENSEMBLE, names.LLM_BLS)
    )
    return aiperf.sweep_targets(
        aiperf_venv(),
        run_targets,
        aiperf.Sweep(config.input_tokens, config.output_tokens),
        config.concurrency,
        engine_dir,
        runs_dir,
        config.slo,
    )


def http(config: SuiteConfig, name: str, base_url: str, model: str, texts: list[str], workload: Workload) -> RunResult:
    """Our OpenAI front under the same in-process client the peer comparison uses."""
    top = max(config.concurrency)
    run_http(name, base_url, model, texts[:2], config.output_tokens, 2, config.slo, workload.name)  # warm-up
    result = run_http(name, base_url, model, texts[: 3 * top], config.output_tokens, top, config.slo, workload.name)
    print(
        f"  {name:18} {workload.name:16} {result.load:>4}: {result.output_tokens_per_s:7.1f} tok/s  "
        f"TTFT p50 {result.ttft_s['p50'] * 1000:6.0f} ms  ITL p50 {result.itl_s['p50'] * 1000:5.1f} ms",
        flush=True,
    )
    return result


def _texts(artifacts: Path) -> list[str]:
    return [entry["text_input"][0] for entry in json.loads((artifacts / "inputs.json").read_text())["data"]]


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def _tokenizer(engine_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(engine_dir))


def _prompts(artifacts: Path, engine_dir: Path) -> list[list[int]]:
    """The exact prompts perf_analyzer sent, tokenized as preprocessing does."""
    tok = _tokenizer(engine_dir)
    return [tok.encode(text) for text in _texts(artifacts)]
