"""`python -m build_engines.fidelity.numerics_sweep`: each candidate numerics setting of a CPU engine
measured on this host (build_engines/openvino/numerics.py), in a process of its own:

- accuracy: the fidelity report (KLD, PPL, top-1, greedy answers) against the float32 checkpoint on
  the same text; the checkpoint's logits and answers are computed once and reused for every setting;
- speed: output tok/s of the served pipeline (OpenVINO GenAI's ContinuousBatchingPipeline, the
  spec's batch and chunk sizes, prefix caching off), in-process, with one stream and with 16, in
  alternating rounds (A, B, ... then ..., B, A) so a host's drift is shared out; the median per setting.

The build (build_engines/openvino/build.py) runs it on the engine it has just made; what it
writes is the table `plan` and `inspect` show, and the fast setting is chosen from it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as build_engines/fidelity/__main__.py: torch's reference

import numpy as np  # noqa: E402

from build_engines.fidelity.evaluate import SETTINGS, cpu_flags, host  # noqa: E402
from build_engines.fidelity.openvino_engine import OpenVinoScorer, compile_properties, serving_pipeline  # noqa: E402
from build_engines.fidelity.texts import GREEDY_PROMPTS  # noqa: E402
from build_engines.openvino.numerics import Numerics, candidates  # noqa: E402

SPEED_STREAMS = (1, 16)
SPEED_TOKENS = 64  # output tokens per request (min = max: every setting generates the same count)
SPEED_ROUNDS = 3  # alternating: A, B, C then C, B, A then A, B, C; a setting must win every round


class CachedReference:
    """The float32 reference, each window's logits and each prompt's greedy answer computed once."""

    def __init__(self, reference) -> None:
        self._reference = reference
        self.describe = reference.describe
        self._logits: dict[tuple, np.ndarray] = {}
        self._greedy: dict[tuple, list[int]] = {}

    def logits(self, ids: list[int], first: int) -> np.ndarray:
        key = (tuple(ids), first)
        if key not in self._logits:
            self._logits[key] = self._reference.logits(ids, first)
        return self._logits[key]

    def greedy(self, prompt_ids: list[int], max_new_tokens: int, eos_ids: set[int]) -> list[int]:
        key = (tuple(prompt_ids), max_new_tokens, tuple(sorted(eos_ids)))
        if key not in self._greedy:
            self._greedy[key] = self._reference.greedy(prompt_ids, max_new_tokens, eos_ids)
        return self._greedy[key]


def output_tok_s(pipe, prompts: list[list[int]], tokens: int) -> float:
    """Output tok/s of `prompts` sent at once, greedy, `tokens` each."""
    import openvino as ov
    import openvino_genai as og

    config = og.GenerationConfig()
    config.max_new_tokens = config.min_new_tokens = tokens
    config.do_sample = False
    t0 = time.perf_counter()
    handles = [pipe.add_request(n, ov.Tensor(np.asarray([p], dtype=np.int64)), config) for n, p in enumerate(prompts)]
    generated = 0
    while pipe.has_non_finished_requests():
        pipe.step()
        for handle in handles:
            while handle.can_read():
                generated += sum(len(out.generated_ids) for out in handle.read().values())
    return generated / (time.perf_counter() - t0)


def measure_speed(
    engine_dir: Path, settings: list[Numerics], prompts: list[list[int]], inference_threads: int, chunk: int, log
) -> dict[Numerics, dict[str, Any]]:
    """Each setting's median output tok/s at each load (`tok_s_<streams>`) and its runs."""
    runs: dict[Numerics, dict[int, list[float]]] = {s: {c: [] for c in SPEED_STREAMS} for s in settings}
    for n in range(SPEED_ROUNDS):
        for setting in settings if n % 2 == 0 else list(reversed(settings)):
            properties = compile_properties(engine_dir, setting, inference_threads)
            pipe = serving_pipeline(engine_dir, properties, max(SPEED_STREAMS), chunk)
            output_tok_s(pipe, prompts[: max(SPEED_STREAMS)], 8)  # warm-up: allocations, the KV pool at size
            for streams in SPEED_STREAMS:
                runs[setting][streams].append(output_tok_s(pipe, prompts[:streams], SPEED_TOKENS))
            del pipe
            gc.collect()
            log(
                f"speed round {n + 1}/{SPEED_ROUNDS}, {setting.label}: "
                + ", ".join(f"{c} stream(s) {runs[setting][c][-1]:.1f} tok/s" for c in SPEED_STREAMS)
            )
    return {s: {f"tok_s_{c}": statistics.median(v) for c, v in r.items()} | {"runs": r} for s, r in runs.items()}


def sweep(
    engine_dir: Path,
    checkpoint: Path,
    kv_cache_precision: str,
    evaluation: str,
    inference_threads: int,
    chunk: int,
    log=print,
    only: list[Numerics] | None = None,
) -> dict:
    """`only`: measure these candidates' fidelity and nothing's speed (a recorded decision reused:
    build_engines/openvino/numerics_decisions.py)."""
    from transformers import AutoTokenizer

    from build_engines.fidelity.evaluate import chat_prompt_ids, fidelity_report
    from build_engines.fidelity.reference import TorchReference

    rows = candidates(kv_cache_precision, cpu_flags())
    if only is not None:
        rows = [(s, selectable) for s, selectable in rows if s in only]
    reference = CachedReference(TorchReference(checkpoint))
    reports = {}
    for setting, _ in rows:
        log(f"fidelity: {setting.label}")
        engine = OpenVinoScorer(engine_dir, compile_properties(engine_dir, setting, inference_threads))
        reports[setting] = fidelity_report(checkpoint, reference, engine, SETTINGS[evaluation], log=log)
        del engine
        gc.collect()
    del reference
    gc.collect()
    # A setting whose logits equal the baseline's to the last bit is not applied on this host (dynamic
    # quantization without VNNI/AMX, seen on an AVX2-only EPYC): its speed would be the baseline's noise.
    baseline = next(s for s, selectable in rows if selectable)
    same = {s for s, _ in rows if s != baseline and reports[s]["logits"] == reports[baseline]["logits"]}
    for s in same:
        log(f"{s.label}: the same logits as {baseline.label}, not applied on this host; its speed is not measured")
    speed: dict[Numerics, dict[str, Any]] = {}
    if only is None:
        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
        prompts = chat_prompt_ids(tokenizer, max(SPEED_STREAMS))
        speed = measure_speed(engine_dir, [s for s, _ in rows if s not in same], prompts, inference_threads, chunk, log)
    return {
        "candidates": [
            {
                "numerics": s.to_dict(),
                "selectable": selectable and s not in same,
                "fidelity": reports[s],
                "speed": speed.get(s, {}),
                "not_applied": s in same,
            }
            for s, selectable in rows
        ],
        "speed_settings": None
        if only is not None
        else {
            "streams": list(SPEED_STREAMS),
            "output_tokens": SPEED_TOKENS,
            "rounds": SPEED_ROUNDS,
            "prompts": f"the first {max(SPEED_STREAMS)} of {len(GREEDY_PROMPTS)} greedy prompts",
            "max_num_batched_tokens": chunk,
            "prefix_caching": False,
        },
        "host": host(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m build_engines.fidelity.numerics_sweep", description=__doc__)
    parser.add_argument("--engine-dir", type=Path, required=True)
    parser.add_argument("--checkpoint", type=Path, required=True, help="the float checkpoint the engine was built from")
    parser.add_argument("--kv-cache-precision", required=True)
    parser.add_argument("--evaluation", choices=sorted(SETTINGS), default="quick")
    parser.add_argument("--inference-threads", type=int, default=0)
    parser.add_argument("--max-num-batched-tokens", type=int, default=512, help="the served chunk (spec limits)")
    parser.add_argument("--out", type=Path, required=True, help="write the measurements here (JSON)")
    parser.add_argument(
        "--only", action="append", type=json.loads, help="a setting (JSON) to measure, fidelity only; repeatable"
    )
    args = parser.parse_args(argv)
    result = sweep(
        args.engine_dir,
        args.checkpoint,
        args.kv_cache_precision,
        args.evaluation,
        args.inference_threads,
        args.max_num_batched_tokens,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
        only=[Numerics.from_dict(d) for d in args.only] if args.only else None,
    )
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
