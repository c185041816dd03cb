"""The engine alone, in this process: the same OpenVINO pipeline the CPU engine model owns,
driven closed-loop at a given concurrency.  Served / offline is the pipeline tax."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.throughput import percentile
from contract.model_configs import OpenVinoEngineParameters


@dataclass(frozen=True)
class OfflineResult:
    concurrency: int
    requests: int
    output_tokens: int
    seconds: float
    output_tokens_per_s: float  # all tokens over the whole run, as genai-perf counts the served runs
    ttft_p50_s: float
    itl_p50_s: float


def run_offline(
    params: OpenVinoEngineParameters, prompts: list[list[int]], output_tokens: int, concurrency: int
) -> OfflineResult:
    import openvino as ov
    import openvino_genai as og

    from model_repository.engines.openvino.openvino_backend import OpenVinoBackend

    backend = OpenVinoBackend(params)
    backend.warm_up()
    pipe = backend.base_pipeline  # the very pipeline object the served engine steps
    queue = list(enumerate(prompts))
    active: dict[int, tuple[Any, float, list[float]]] = {}  # an openvino_genai GenerationHandle (untyped)
    ttfts, itls, tokens = [], [], 0

    def admit():
        key, ids = queue.pop()
        gc = og.GenerationConfig()
        gc.max_new_tokens = gc.min_new_tokens = output_tokens
        gc.do_sample = False
        handle = pipe.add_request(key, ov.Tensor(np.asarray([ids], dtype=np.int64)), gc)
        active[key] = (handle, time.monotonic(), [])

    t0 = time.monotonic()
    while queue or active:
        while queue and len(active) < concurrency:
            admit()
        pipe.step()
        now = time.monotonic()
        for key, (handle, start, stamps) in list(active.items()):
            n = 0
            while handle.can_read():
                n += sum(len(o.generated_ids) for o in handle.read().values())
            if n:
                (ttfts.append(now - start) if not stamps else itls.append(now - stamps[-1]))
                stamps.append(now)
                tokens += n
            if handle.get_status().name != "RUNNING" and not handle.can_read():
                del active[key]
    elapsed = time.monotonic() - t0
    return OfflineResult(
        concurrency,
        len(prompts),
        tokens,
        round(elapsed, 3),
        round(tokens / elapsed, 1),
        round(percentile(ttfts, 0.5), 4),
        round(percentile(itls, 0.5), 4),
    )


def engine_parameters(repository: Path) -> OpenVinoEngineParameters:
    """The served engine's exact parameters, from the rendered repository."""
    from build_engines.render import read_config
    from contract import names
    from contract.model_parameters import from_parameters

    config = read_config(repository / names.OPENVINO_ENGINE / "config.pbtxt")
    return from_parameters(
        OpenVinoEngineParameters,
        config.name,
        {k: {"string_value": v.string_value} for k, v in config.parameters.items()},
    )
