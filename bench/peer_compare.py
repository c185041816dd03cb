"""`python -m bench peers`: our served stack (Triton ensemble behind the OpenAI front) against
the strongest CPU servers, on the same checkpoint, prompts and fixed-length answers, one
OpenAI streaming client (bench/http_load.py) for all.

Machines here drift ~2x within an hour and the client shares the two cores, so absolute
figures mean little: each peer is measured in pairs (ours, peer) at each concurrency, the order
alternating between rounds, and the report gives the ratio of every pair.  Every run sends
prompts no earlier run sent, so neither side's prompt/prefix cache sees a repeat."""

from __future__ import annotations

import contextlib
import enum
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.genai_perf import RunResult, Slo
from bench.http_load import run_http
from bench.peer import PeerLaunch, PeerServer, llama_server, transformers_serve, vllm_cpu
from bench.workload import fixed_length_jobs
from build_engines.openvino.numerics import EXACT, Numerics

if TYPE_CHECKING:
    from bench.peer_builds import ServedLlamaCpp


class Peer(str, enum.Enum):
    LLAMA_CPP = "llama.cpp"
    VLLM = "vllm"
    TRANSFORMERS = "transformers"


OURS: dict[str, object] = {"ignore_eos": True}  # our front's fixed-length answers (min_tokens = max_tokens)


@dataclass(frozen=True)
class Pair:
    peer: str
    concurrency: int
    round: int
    ours: RunResult
    theirs: RunResult
    ours_label: str = "ours"  # which of our servers (bench peers --repository, one per numerics)

    @property
    def ratio(self) -> float:
        return (
            self.ours.output_tokens_per_s / self.theirs.output_tokens_per_s
            if self.theirs.output_tokens_per_s
            else float("nan")
        )


def prompts(count: int, seed: int) -> list[str]:
    return [job.messages[0].content for job in fixed_length_jobs(count, 1, seed=seed)]


def launch(peer: Peer, checkpoint: Path, port: int, llama: ServedLlamaCpp | None = None) -> PeerLaunch:
    """Build (first use) and describe one peer at its best setting on this host; llama.cpp: the
    build that answered its probe (`llama`, else found now: peer_builds.ensure_served_llama_cpp)."""
    from bench import peer_builds
    from bench.environments import ROOT, ensure_venv

    python = Path(sys.executable)
    if peer is Peer.LLAMA_CPP:
        llama = llama or peer_builds.ensure_served_llama_cpp(python, checkpoint)
        return llama_server(llama.llama.server, llama.gguf, port, build=llama.choice)
    if peer is Peer.VLLM:
        return vllm_cpu(peer_builds.ensure_vllm_cpu(), checkpoint, port, tcmalloc=peer_builds.tcmalloc())
    return transformers_serve(ensure_venv("peer-venv", ROOT / "requirements" / "peer.lock"), checkpoint, port)


def shown(command: tuple[str, ...], root: Path | None = None) -> str:
    """A peer's command as the report prints it: paths inside the repository (or its build/, which
    may be a link) relative to it, since a reader's clone has none of this machine's paths."""
    if root is None:
        from bench.environments import ROOT

        root = ROOT
    prefixes = {f"{root}/": "", f"{root.resolve()}/": "", f"{(root / 'build').resolve()}/": "build/"}

    def relative(arg: str) -> str:
        for prefix, instead in prefixes.items():
            if arg.startswith(prefix):
                return instead + arg.removeprefix(prefix)
        return arg

    return " ".join(relative(arg) for arg in command)


@dataclass(frozen=True)
class Ours:
    label: str  # "ours" alone; with several, the numerics each serves
    url: str
    model: str


def compare(
    ours: list[Ours],
    launches: list[tuple[PeerLaunch, Path]],
    levels: tuple[int, ...],
    output_tokens: int,
    rounds: int,
    slo: Slo,
    progress=print,
) -> list[Pair]:
    """`launches`: (peer, its log file).  Our servers stay up throughout (idle, each takes ~1% of
    a core); each peer runs beside them while its pairs are measured, stopped while ours run.  With
    several of ours (one per numerics), each round runs them all and the peer, the order reversed
    every other round, and gives one pair per server of ours."""
    pairs: list[Pair] = []
    seed = 1000
    for peer, log in launches:
        with PeerServer(peer, log) as server:
            for level in levels:
                for r in range(rounds):
                    seed += 1
                    texts = prompts(max(4, 2 * level), seed)
                    sides = [(o.label, o.url, o.model, OURS) for o in ours] + [
                        (peer.name, server.url + "/v1", server.model, peer.extra_body)
                    ]
                    runs = {}
                    for name, url, model, extra in sides if r % 2 == 0 else sides[::-1]:
                        with server.paused() if name != peer.name else contextlib.nullcontext():
                            runs[name] = run_http(
                                name, url, model, texts, output_tokens, level, slo, f"osl{output_tokens}", extra
                            )
                    for o in ours:
                        pair = Pair(peer.name, level, r, runs[o.label], runs[peer.name], o.label)
                        pairs.append(pair)
                        progress(
                            f"  {peer.name:28} c{level:<3} round {r}: {o.label} {pair.ours.output_tokens_per_s:6.1f} "
                            f"tok/s, peer {pair.theirs.output_tokens_per_s:6.1f} tok/s -> {pair.ratio:.2f}x"
                        )
    return pairs


def ours_ratios(pairs: list[Pair]) -> list[str]:
    """With several servers of ours: each against the first, from the same rounds (each round ran
    them back to back), per load."""
    labels = list(dict.fromkeys(p.ours_label for p in pairs))
    if len(labels) < 2:
        return []
    runs = {(p.ours_label, p.peer, p.concurrency, p.round): p.ours.output_tokens_per_s for p in pairs}
    lines = []
    for label in labels[1:]:
        for level in dict.fromkeys(p.concurrency for p in pairs):
            ratios = [
                runs[(label, peer, c, r)] / runs[(labels[0], peer, c, r)]
                for (first, peer, c, r) in runs
                if first == labels[0] and c == level and runs[(labels[0], peer, c, r)]
            ]
            lines.append(
                f"c{level}: {label} / {labels[0]}, output tok/s {statistics.median(ratios):.2f}x median of "
                f"{len(ratios)} rounds ({', '.join(f'{x:.2f}' for x in ratios)})"
            )
    return lines


def _ms(x: float) -> str:
    return f"{x * 1000:.0f}"


def markdown(pairs: list[Pair]) -> list[str]:
    lines = [
        "| ours | peer | load | ours / peer out tok/s (each pair) | median | ours tok/s | peer tok/s | TTFT p50 ours "
        "/ peer ms | TTFT p99 ours / peer ms | ITL p50 ours / peer ms |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, str, int], list[Pair]] = {}
    for p in pairs:
        groups.setdefault((p.ours_label, p.peer, p.concurrency), []).append(p)
    for (label, peer, level), group in groups.items():
        med = lambda f: statistics.median(f(p) for p in group)  # noqa: E731, B023  (used in this iteration)
        lines.append(
            f"| {label} | {peer} | c{level} | {', '.join(f'{p.ratio:.2f}' for p in group)} | "
            f"**{med(lambda p: p.ratio):.2f}x** | "
            f"{med(lambda p: p.ours.output_tokens_per_s):.0f} | {med(lambda p: p.theirs.output_tokens_per_s):.0f} | "
            f"{_ms(med(lambda p: p.ours.ttft_s['p50']))} / {_ms(med(lambda p: p.theirs.ttft_s['p50']))} | "
            f"{_ms(med(lambda p: p.ours.ttft_s['p99']))} / {_ms(med(lambda p: p.theirs.ttft_s['p99']))} | "
            f"{_ms(med(lambda p: p.ours.itl_s['p50']))} / {_ms(med(lambda p: p.theirs.itl_s['p50']))} |"
        )
    return lines


def verdicts(pairs: list[Pair]) -> list[str]:
    """Plain words: where a peer wins."""
    out = []
    groups: dict[tuple[str, str, int], list[float]] = {}
    for p in pairs:
        groups.setdefault((p.ours_label, p.peer, p.concurrency), []).append(p.ratio)
    several = len({label for label, _, _ in groups}) > 1
    for (label, peer, level), ratios in groups.items():
        m = statistics.median(ratios)
        who = (
            "we are faster"
            if min(ratios) > 1
            else f"{peer} is faster"
            if max(ratios) < 1
            else "no clear winner (pairs disagree)"
        )
        whose = f"{label}, " if several else ""
        out.append(f"{whose}c{level} vs {peer}: ours/peer {m:.2f}x median of {len(ratios)} pairs: {who}")
    return out


def engines_alone(
    repository: Path,
    llama: ServedLlamaCpp,
    pairs: list[Pair],
    output_tokens: int,
    rounds: int,
    prompt_tokens: int = 64,
) -> list[str]:
    """The engines' pairs at one stream as report lines, beside the served llama.cpp pairs at c1
    (llama-bench of the build that served)."""
    from bench import engine_alone
    from bench.offline import engine_parameters

    gguf = llama.gguf
    engine_pairs = engine_alone.measure(
        engine_parameters(repository),
        llama.llama.bench,
        gguf,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        rounds=rounds,
    )
    first = pairs[0].ours_label if pairs else ""
    served = [p.ratio for p in pairs if p.peer.startswith("llama.cpp") and p.concurrency == 1 and p.ours_label == first]
    return engine_alone.markdown(
        engine_pairs, statistics.median(served) if served else None, gguf, prompt_tokens, output_tokens
    )


def build_lines(launches: list[PeerLaunch]) -> list[str]:
    """Which build of each peer that has one served, and why (llama.cpp: native, or explicit flags)."""
    return [f"- {launch.name}: {launch.build.describe()}" for launch in launches if launch.build is not None]


def json_rows(pairs: list[Pair], launches: list[PeerLaunch]) -> list[dict[str, object]]:
    """peers.json: every pair, with the build of the peer that served it where it has one."""
    build_of = {launch.name: launch.build.to_dict() for launch in launches if launch.build is not None}
    return [
        {
            "peer": p.peer,
            "peer_build": build_of.get(p.peer),
            "ours_label": p.ours_label,
            "concurrency": p.concurrency,
            "round": p.round,
            "ratio": round(p.ratio, 3),
            "ours": p.ours.to_dict(),
            "theirs": p.theirs.to_dict(),
        }
        for p in pairs
    ]


def served_numerics(repository: Path) -> Numerics:
    """The numerics a rendered repository's CPU engine serves."""
    from bench.offline import engine_parameters

    params = engine_parameters(repository)
    return Numerics(params.activation_precision, params.kv_cache_precision, params.dynamic_quantization_group_size)


def ours_label(repository: Path) -> str:
    """Which numerics a repository's engine serves, as the report names the server."""
    served = served_numerics(repository)
    return "ours (exact)" if served == EXACT else f"ours ({served.label})"


def with_exact(repository: Path, out: Path) -> list[Path]:
    """The repository and, where its engine serves other numerics than exact, a copy serving exact
    (the same engine: a fast build serves exact as it is), so the report states exact's cost."""
    from build_engines.render import copy_repository
    from contract import names

    if served_numerics(repository) == EXACT:
        return [repository]
    values = {k: str(v) for k, v in EXACT.to_dict().items()}
    return [repository, copy_repository(repository, out / "repository-exact", names.OPENVINO_ENGINE, values)]


def run(
    repositories: list[Path],
    out: Path,
    peers: tuple[Peer, ...],
    levels: tuple[int, ...],
    output_tokens: int,
    rounds: int,
    slo: Slo,
    engine_rounds: int = 3,
) -> tuple[list[Pair], Path]:
    """Start our server (Triton + OpenAI front) from each repository (several: the same engine at
    other numerics, `build --numerics exact --repository ...`), measure every peer against them,
    write peers.md and peers.json under `out`.  With llama.cpp among the peers, the servers
    stopped, `engine_rounds` pairs of the engines alone at one stream (bench/engine_alone.py), of
    the first repository's engine."""
    import json

    from build_engines.render import read_config
    from contract import names
    from contract.build_record import BuildRecord
    from serving.launcher import ServerSettings, TritonServer, free_loopback_port
    from serving.openai_process import OpenAiFront, served_model_name

    def checkpoint_of(repository: Path) -> Path:
        config = read_config(repository / names.PREPROCESSING / "config.pbtxt")
        return Path(BuildRecord.read(Path(config.parameters["tokenizer_dir"].string_value)).spec["checkpoint"])

    checkpoint = checkpoint_of(repositories[0])
    if any(checkpoint_of(r) != checkpoint for r in repositories[1:]):
        raise ValueError(f"every repository must serve {checkpoint}: they are compared with the same peers")
    labels = [ours_label(r) if len(repositories) > 1 else "ours" for r in repositories]
    if len(set(labels)) < len(labels):
        raise ValueError(f"the repositories must serve different numerics, got {labels}")
    out.mkdir(parents=True, exist_ok=True)
    llama = None
    if Peer.LLAMA_CPP in peers:
        from bench.peer_builds import ensure_served_llama_cpp

        llama = ensure_served_llama_cpp(Path(sys.executable), checkpoint)
    launches = [(launch(peer, checkpoint, free_loopback_port(), llama), out / f"{peer.value}.log") for peer in peers]
    ours: list[Ours] = []
    with contextlib.ExitStack() as stack:
        for n, repository in enumerate(repositories):
            suffix = f"-{n}" if n else ""
            settings = ServerSettings.on_free_ports(repository, out / f"tritonserver{suffix}.log")
            model = served_model_name(repository)
            stack.enter_context(TritonServer(settings))
            front = OpenAiFront(
                settings.grpc_url, settings.host, free_loopback_port(), model, out / f"openai_front{suffix}.log"
            )
            front.start()
            stack.callback(front.stop)
            run_http("warm-up", front.url + "/v1", model, prompts(2, 1), 8, 2, slo, "warm-up", OURS)
            ours.append(Ours(labels[n], front.url + "/v1", model))
        pairs = compare(ours, launches, levels, output_tokens, rounds, slo)
    engines = (
        engines_alone(repositories[0], llama, pairs, output_tokens, engine_rounds)
        if llama and engine_rounds > 0
        else []
    )
    report = out / "peers.md"
    builds = build_lines([launch for launch, _ in launches])
    report.write_text(
        "\n".join(
            [
                f"# Ours (Triton ensemble behind the OpenAI front) vs CPU peers: {checkpoint.name}, "
                f"{output_tokens}-token answers",
                "",
                "One OpenAI streaming client (bench/http_load.py, in-process asyncio) for every server; pairs "
                "alternate "
                "their order; each run sends new prompts. Peers: "
                + "; ".join(f"`{shown(launch.command)}`" for launch, _ in launches),
                "",
                *([*builds, ""] if builds else []),
                *markdown(pairs),
                "",
                *[f"- {v}" for v in verdicts(pairs)],
                *[f"- {v}" for v in ours_ratios(pairs)],
                "",
                *(["## The engines alone, one stream (no server)", "", *engines, ""] if engines else []),
            ]
        )
    )
    (out / "peers.json").write_text(
        json.dumps(
            json_rows(pairs, [launch for launch, _ in launches]),
            indent=1,
        )
        + "\n"
    )
    return pairs, report
