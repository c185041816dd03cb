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
