"""`python -m bench speculative`: prompt-lookup decoding on an input-grounded workload (answers
that copy spans of the prompt: rewrite a passage, fix a line of given code), the served
engine's own backend driven in-process, plain and with prompt lookup in alternating rounds, at
each concurrency: output tok/s, tokens per engine step, and how many greedy answers equal plain
decoding's (both with the deployment's numerics: with the default unquantized KV cache they must
all be equal, build_engines/openvino/precision.py)."""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from contract.model_configs import OpenVinoEngineParameters
from model_repository.engine_step.engine_inputs import EngineInputs

TASKS = (
    "Repeat the following text exactly:\n\n{text}",
    "Rewrite the following text, keeping every sentence:\n\n{text}",
    "Here is some code. Copy it and add a comment line at the top:\n\n{text}",
)


def grounded_prompts(tok, count: int, seed: int) -> list[list[int]]:
    """Chat prompts around ~600-character spans of the Python docs and the standard library."""
    import inspect
    import json as json_module
    import pydoc_data.topics as topics

    sources = (Path(topics.__file__).read_text(), inspect.getsource(json_module))
    out = []
    for i in range(count):
        text = sources[i % 2]
        start = (seed * 7919 + i * 104729) % (len(text) - 800)
        task = TASKS[i % len(TASKS)].format(text=text[start : start + 600])
        out.append(
            tok.apply_chat_template(
                [{"role": "user", "content": task}], add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
        )
    return out


@dataclass(frozen=True)
class SpecRun:
    prompt_lookup: bool
    concurrency: int
    output_tokens: int
    seconds: float
    steps_with_tokens: int  # engine steps in which a request got tokens, summed over requests
    answers: tuple[tuple[int, ...], ...]

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds

    @property
    def tokens_per_step(self) -> float:
        return self.output_tokens / self.steps_with_tokens if self.steps_with_tokens else 0.0


def run_engine(
    params: OpenVinoEngineParameters, prompts: list[list[int]], max_tokens: int, concurrency: int
) -> SpecRun:
    """Closed loop at `concurrency`, greedy, through the CPU engine's backend (OpenVinoBackend)."""
    from model_repository.engines.openvino.openvino_backend import OpenVinoBackend, OpenVinoHandle

    backend = OpenVinoBackend(params)
    backend.warm_up()
    queue = list(enumerate(prompts))
    active: dict[int, OpenVinoHandle] = {}
    answers: dict[int, list[int]] = {}
    steps = 0
    t0 = time.monotonic()
    while queue or active:
        while queue and len(active) < concurrency:
            key, ids = queue.pop(0)
            active[key] = backend.add(
                key, EngineInputs(input_ids=tuple(ids), input_lengths=len(ids), request_output_len=max_tokens, end_id=2)
            )
            answers[key] = []
        backend.step()
        for key, handle in list(active.items()):
            ids, _ = handle.read()
            if ids:
                steps += 1
                answers[key] += ids
            if handle.status().value != "running":
                answers[key] += handle.read()[0]
                del active[key]
    seconds = time.monotonic() - t0
    return SpecRun(
        params.prompt_lookup,
        concurrency,
        sum(len(a) for a in answers.values()),
        seconds,
        steps,
        tuple(tuple(answers[k]) for k in sorted(answers)),
    )


def measure(
    params: OpenVinoEngineParameters, tok, levels: tuple[int, ...], max_tokens: int, rounds: int, progress=print
) -> list[tuple[SpecRun, SpecRun]]:
    """(plain, prompt lookup) pairs, order alternating, new prompts every round."""
    pairs = []
    for level in levels:
        for r in range(rounds):
            prompts = grounded_prompts(tok, max(2, 2 * level), seed=r * 31 + level)
            runs = {}
            for lookup in (False, True) if r % 2 == 0 else (True, False):
                runs[lookup] = run_engine(dataclasses.replace(params, prompt_lookup=lookup), prompts, max_tokens, level)
            pairs.append((runs[False], runs[True]))
            progress(
                f"  c{level} round {r}: plain {runs[False].tokens_per_s:6.1f} tok/s, prompt lookup "
                f"{runs[True].tokens_per_s:6.1f} tok/s ({runs[True].tokens_per_step:.2f} tokens/step) -> "
                f"{runs[True].tokens_per_s / runs[False].tokens_per_s:.2f}x"
            )
    return pairs


def markdown(pairs: list[tuple[SpecRun, SpecRun]], num_assistant_tokens: int) -> list[str]:
    lines = [
        "| concurrency | prompt lookup / plain out tok/s (each pair) | median | tokens per step (lookup) | "
        "draft acceptance (est.) | greedy answers equal to plain |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for level in sorted({p.concurrency for p, _ in pairs}):
        group = [(p, s) for p, s in pairs if p.concurrency == level]
        ratios = [s.tokens_per_s / p.tokens_per_s for p, s in group]
        per_step = statistics.median(s.tokens_per_step for _, s in group)
        equal = sum(a == b for p, s in group for a, b in zip(p.answers, s.answers))
        total = sum(len(p.answers) for p, _ in group)
        lines.append(
            f"| {level} | {', '.join(f'{r:.2f}' for r in ratios)} | **{statistics.median(ratios):.2f}x** | "
            f"{per_step:.2f} | {max(0.0, per_step - 1) / num_assistant_tokens:.0%} | {equal}/{total} |"
        )
    return lines
