"""`python -m bench speculative`: prompt-lookup decoding on an input-grounded workload (answers
that copy spans of the prompt: rewrite a passage, fix a line of given code), the served
engine's own backend driven in-process, plain and with prompt lookup in alternating rounds, at
each concurrency: output tok/s, tokens per engine step, and how many greedy answers equal plain
decoding's.  Three runs a round: plain as deployed (its KV cache, u8 by default), prompt lookup as
a --prompt-lookup build compiles it (the unquantized KV cache that build defaults to,
build_engines/openvino_precision.py), and plain with those same numerics, which the lookup
answers must equal and which isolates what the drafts alone buy."""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from build_engines.openvino_precision import default_kv_cache_precision
from contract.model_configs import OpenVinoEngineParameters
from model_repository.engine_step.engine_inputs import EngineInputs

TASKS = ("Repeat the following text exactly:\n\n{text}", "Rewrite the following text, keeping every sentence:\n\n{text}",
         "Here is some code. Copy it and add a comment line at the top:\n\n{text}")


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
        task = TASKS[i % len(TASKS)].format(text=text[start:start + 600])
        out.append(tok.apply_chat_template([{"role": "user", "content": task}], add_generation_prompt=True,
                                           tokenize=True, return_dict=True)["input_ids"])
    return out


@dataclass(frozen=True)
class SpecRun:
    prompt_lookup: bool
    kv_cache_precision: str
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


def run_engine(params: OpenVinoEngineParameters, prompts: list[list[int]], max_tokens: int, concurrency: int) -> SpecRun:
    """Closed loop at `concurrency`, greedy, through the CPU engine's backend (OpenVinoBackend)."""
    from model_repository.engines.openvino.openvino_backend import OpenVinoBackend

    backend = OpenVinoBackend(params)
    backend.warm_up()
    queue = list(enumerate(prompts))
    active, answers, steps = {}, {}, 0
    t0 = time.monotonic()
    while queue or active:
        while queue and len(active) < concurrency:
            key, ids = queue.pop(0)
            active[key] = backend.add(key, EngineInputs(input_ids=tuple(ids), input_lengths=len(ids),
                                                        request_output_len=max_tokens, end_id=2))
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
    return SpecRun(params.prompt_lookup, params.kv_cache_precision, concurrency, sum(len(a) for a in answers.values()),
                   seconds, steps, tuple(tuple(answers[k]) for k in sorted(answers)))


@dataclass(frozen=True)
class SpecRound:
    deployed: SpecRun  # plain, the deployment's numerics
    same_numerics: SpecRun  # plain, prompt lookup's numerics
    lookup: SpecRun


def measure(params: OpenVinoEngineParameters, tok, levels: tuple[int, ...], max_tokens: int, rounds: int,
            progress=print) -> list[SpecRound]:
    """The three runs of each round in rotating order, new prompts every round."""
    lookup = dataclasses.replace(params, prompt_lookup=True,
                                 kv_cache_precision=default_kv_cache_precision(True, params.activation_precision))
    variants = {"deployed": dataclasses.replace(params, prompt_lookup=False),
                "same_numerics": dataclasses.replace(lookup, prompt_lookup=False), "lookup": lookup}
    out = []
    for level in levels:
        for r in range(rounds):
            prompts = grounded_prompts(tok, max(2, 2 * level), seed=r * 31 + level)
            order = list(variants)[r % 3:] + list(variants)[:r % 3]
            runs = {name: run_engine(variants[name], prompts, max_tokens, level) for name in order}
            out.append(SpecRound(**runs))
            progress(f"  c{level} round {r}: plain {runs['deployed'].tokens_per_s:6.1f} tok/s "
                     f"(KV {params.kv_cache_precision}), {runs['same_numerics'].tokens_per_s:6.1f} "
                     f"(KV {lookup.kv_cache_precision}); prompt lookup {runs['lookup'].tokens_per_s:6.1f} tok/s "
                     f"({runs['lookup'].tokens_per_step:.2f} tokens/step) -> "
                     f"{runs['lookup'].tokens_per_s / runs['deployed'].tokens_per_s:.2f}x")
    return out


def markdown(rounds: list[SpecRound], num_assistant_tokens: int) -> list[str]:
    deployed, lookup = rounds[0].deployed.kv_cache_precision, rounds[0].lookup.kv_cache_precision
    lines = [f"| concurrency | prompt lookup (KV {lookup}) / plain as deployed (KV {deployed}), out tok/s (each round) | "
             f"median | prompt lookup / plain, both KV {lookup} (median) | tokens per step (lookup) | "
             f"draft acceptance (est.) | greedy answers equal to plain, same numerics |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for level in sorted({r.lookup.concurrency for r in rounds}):
        group = [r for r in rounds if r.lookup.concurrency == level]
        ratios = [r.lookup.tokens_per_s / r.deployed.tokens_per_s for r in group]
        same = statistics.median(r.lookup.tokens_per_s / r.same_numerics.tokens_per_s for r in group)
        per_step = statistics.median(r.lookup.tokens_per_step for r in group)
        equal = sum(a == b for r in group for a, b in zip(r.same_numerics.answers, r.lookup.answers))
        total = sum(len(r.lookup.answers) for r in group)
        lines.append(f"| {level} | {', '.join(f'{x:.2f}' for x in ratios)} | **{statistics.median(ratios):.2f}x** | "
                     f"{same:.2f}x | {per_step:.2f} | {max(0.0, per_step - 1) / num_assistant_tokens:.0%} | "
                     f"{equal}/{total} |")
    return lines
