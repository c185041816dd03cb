"""What postprocessing costs per streamed token, at 1 and 16 concurrent streams, for short
and long answers: the incremental detokenizer must not slow down as an answer grows.

Two views: the logic alone in this process (StreamPostprocessor fed one token per stream per
call, as the engine streams), and the served model (CPU time of the `postprocessing` stub,
Triton's Python-backend plumbing included, over the tokens it handled)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from client import AsyncLlmClient, ChatMessage, SamplingParams
from contract import names
from model_repository.text.detokenizer import DetokenizerFactory
from model_repository.text.postprocess_params import PostprocessParams
from model_repository.text.stream_postprocessor import StreamPostprocessor

SAMPLE = (
    "The quick brown fox jumps over the lazy dog. 日本語のテキスト、naïve café, emoji 🙂👨‍👩‍👧 and code: "
    "def f(x):\n    return x * 2  # ✓\n"
)


@dataclass(frozen=True)
class Cost:
    where: str  # "in-process" | "served"
    streams: int
    tokens_per_stream: int
    us_per_token: float

    def to_dict(self) -> dict:
        return asdict(self)


def in_process(tokenizer_dir: Path, streams: int, length: int, repeats: int = 3) -> Cost:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    text_ids = tok.encode(SAMPLE * (length // 20 + 2), add_special_tokens=False).ids[:length]
    best = float("inf")
    for _ in range(repeats):
        post = StreamPostprocessor(DetokenizerFactory(tok))
        params = [
            PostprocessParams(
                stream_id=f"s{i}",
                max_tokens=length + 1,
                end_ids=(2,),
                num_input_tokens=8,
                streaming=True,
                stop_strings=("\nUser:",),
            ).to_json()
            for i in range(streams)
        ]
        t0 = time.perf_counter()
        for token in text_ids:
            for p in params:
                post.process(p, [token])
        best = min(best, (time.perf_counter() - t0) / (len(text_ids) * streams))
    return Cost("in-process", streams, length, round(best * 1e6, 2))


def served(grpc_url: str, server_pid: int, streams: int, length: int) -> Cost:
    """CPU time of the postprocessing model's process per token it turned into text (CPU
    time, not wall time: on a busy machine wall time mostly measures waiting for a core)."""
    import psutil

    stubs = [
        p
        for p in psutil.Process(server_pid).children(recursive=True)
        if f"{names.POSTPROCESSING}_0" in " ".join(p.cmdline())
    ]
    if not stubs:
        raise RuntimeError("no postprocessing stub under the server")

    def compute_ns() -> int:
        return int(sum(sum(p.cpu_times()[:2]) for p in stubs) * 1e9)

    async def load():
        async with AsyncLlmClient(grpc_url) as c:
            results = await asyncio.gather(
                *(
                    c.generate(
                        [ChatMessage("user", f"Story {i}")], SamplingParams(max_tokens=length, min_tokens=length)
                    )
                    for i in range(streams)
                )
            )
        return sum(r.completion_tokens for r in results)

    before = compute_ns()
    tokens = asyncio.run(load())
    spent = compute_ns() - before
    return Cost("served", streams, length, round(spent / 1e3 / tokens, 2))


STREAMS, LENGTHS = (1, 16), (64, 1024)


def measure(repository: Path, served_too: bool, log_file: Path) -> list[Cost]:
    """in_process at each of STREAMS x LENGTHS for the repository's tokenizer, and with
    `served_too` the same against a server of the repository (its log in `log_file`)."""
    from bench.suite import engine_dir_of

    tokenizer_dir = engine_dir_of(repository)
    rows = [in_process(tokenizer_dir, s, n) for s in STREAMS for n in LENGTHS]
    if served_too:
        from serving.launcher import ServerSettings, TritonServer

        settings = ServerSettings.on_free_ports(repository, log_file)
        with TritonServer(settings) as server:
            rows += [served(settings.grpc_url, server.pid, s, n) for s in STREAMS for n in LENGTHS]
    return rows


def summary(rows: list[Cost]) -> list[str]:
    """A line per row, then per place and stream count the long answer's cost per token over the short one's."""
    lines = [
        f"{r.where:10} {r.streams:>2} streams x {r.tokens_per_stream:>4} tokens: {r.us_per_token:7.2f} us/token"
        for r in rows
    ]
    for where in {r.where for r in rows}:
        for s in STREAMS:
            short, long_ = (
                next(r for r in rows if (r.where, r.streams, r.tokens_per_stream) == (where, s, n)) for n in LENGTHS
            )
            lines.append(
                f"{where} {s} streams: 1024-token / 64-token cost per token = "
                f"{long_.us_per_token / short.us_per_token:.2f}"
            )
    return lines
