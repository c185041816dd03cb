"""One fidelity report: an engine's logits and greedy answers against the float32 checkpoint's.

The report is what `build` stores in build.json (`fidelity`), `inspect` prints and the gate
checks.  Two sizes: `quick` (what every build runs; sized to keep the first `make demo` short)
and `full` (`--full`: the whole measurement the defaults were chosen from).
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from build_engines.fidelity.metrics import LogitComparison, greedy_summary
from build_engines.fidelity.texts import GREEDY_PROMPTS, evaluation_text, windows

REPORT_VERSION = 1


@dataclass(frozen=True)
class EvalSettings:
    name: str
    max_tokens: int  # evaluation text tokens used (from its start)
    window: int = 1024
    stride: int = 512
    prompts: int = 20  # greedy prompts (the first N of GREEDY_PROMPTS)
    answer_tokens: int = 128  # greedy answer length

    def validate(self) -> None:
        if self.max_tokens < self.window or not 0 < self.stride <= self.window:
            raise ValueError(f"need max_tokens >= window > 0 and 0 < stride <= window: {self}")
        if not 0 <= self.prompts <= len(GREEDY_PROMPTS) or self.answer_tokens < 1:
            raise ValueError(f"prompts must be 0..{len(GREEDY_PROMPTS)} and answer_tokens >= 1: {self}")


# quick: what every build runs, sized so the first `make demo` stays within about a minute of
# what it took without it: 2 windows (1,535 scored tokens: 1023 + 512) + 3 prompts x 48 tokens.
# Measured in a build of the default int8 engine on this 2-core host under load ~4 (other jobs):
# 3 windows + 4 x 48 took 128 s before the metrics were reduced in blocks, 94 s after; the mean
# KLD after 2 of those windows was within 2% of the 3-window value (0.00352 vs 0.00348).
# full: the measurement of DESIGN.md section 6 (24,575 scored tokens, 20 x 128-token answers).
SETTINGS = {
    "quick": EvalSettings("quick", max_tokens=1536, prompts=3, answer_tokens=48),
    "full": EvalSettings("full", max_tokens=24576, prompts=20, answer_tokens=128),
}


class Scorer(Protocol):
    describe: dict

    def logits(self, ids: list[int], first: int) -> np.ndarray: ...


def cpu_flags() -> list[str]:
    """The vector-ISA flags of this host's CPU that decide what OpenVINO computes natively."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    wanted = (
        "avx2",
        "avx512f",
        "avx512_bf16",
        "avx512_fp16",
        "avx512_vnni",
        "avx_vnni",
        "amx_bf16",
        "amx_int8",
        "amx_fp16",
        "fma",
        "f16c",
    )
    have = set(line.split(":", 1)[-1].split())
    return [f for f in wanted if f in have]


def cpu_vendor() -> str:
    """/proc/cpuinfo's vendor_id ('' where it cannot be read)."""
    return next((ln.split(":", 1)[1].strip() for ln in _cpuinfo_lines() if ln.startswith("vendor_id")), "")


def host() -> dict:
    model = next(
        (ln.split(":", 1)[1].strip() for ln in _cpuinfo_lines() if ln.startswith("model name")), platform.processor()
    )
    import os

    return {"cpu": model, "cores": os.cpu_count(), "cpu_flags": cpu_flags()}


def _cpuinfo_lines() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def chat_prompt_ids(tokenizer, n: int) -> list[list[int]]:
    return [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        for p in GREEDY_PROMPTS[:n]
    ]


def eos_ids(checkpoint: Path) -> set[int]:
    config = (
        json.loads((checkpoint / "generation_config.json").read_text())
        if (checkpoint / "generation_config.json").is_file()
        else {}
    )
    eos = config.get("eos_token_id", [])
    return set(eos if isinstance(eos, list) else [eos]) or {2}


def compare_logits(
    reference: Scorer, engine: Scorer, ids: list[int], settings: EvalSettings, log=lambda msg: None
) -> dict:
    comparison = LogitComparison()
    spans = windows(len(ids), settings.window, settings.stride)
    for n, (start, end, first) in enumerate(spans, 1):
        window_ids = ids[start:end]
        rel_first = first - start
        comparison.add(
            reference.logits(window_ids, rel_first),
            engine.logits(window_ids, rel_first),
            np.asarray(window_ids[rel_first:]),
        )
        log(f"window {n}/{len(spans)}: mean KLD so far {np.concatenate(comparison.kld).mean():.5f}")
    return comparison.summary() | {"windows": len(spans)}


def fidelity_report(checkpoint: Path, reference, engine, settings: EvalSettings, log=lambda msg: None) -> dict:
    """The whole report: text and settings used, reference and engine described, the metrics."""
    from transformers import AutoTokenizer

    settings.validate()
    t0 = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    text = evaluation_text()
    # Tokenize a prefix long enough for the tokens asked for (the whole file is ~171k tokens).
    all_ids = tokenizer(text.text[: settings.max_tokens * 16], add_special_tokens=False)["input_ids"]
    if len(all_ids) < settings.max_tokens:
        all_ids = tokenizer(text.text, add_special_tokens=False)["input_ids"]
    ids = all_ids[: settings.max_tokens]
    if len(ids) < settings.max_tokens:
        raise ValueError(f"{text.path} has {len(ids)} tokens, fewer than the {settings.max_tokens} asked for")
    logits = compare_logits(reference, engine, ids, settings, log)
    greedy = {}
    if settings.prompts:
        prompts = chat_prompt_ids(tokenizer, settings.prompts)
        eos = eos_ids(checkpoint)
        ref_answers = [reference.greedy(p, settings.answer_tokens, eos) for p in prompts]
        ours = engine.greedy_answers(prompts, settings.answer_tokens, eos)
        greedy = greedy_summary(list(zip(ref_answers, ours))) | {"answer_tokens": settings.answer_tokens}
    return {
        "version": REPORT_VERSION,
        "settings": asdict(settings),
        "text": text.describe() | {"tokens_used": len(ids)},
        "reference": reference.describe,
        "engine": engine.describe,
        "host": host(),
        "logits": logits,
        "greedy": greedy,
        "seconds": round(time.monotonic() - t0, 1),
    }
