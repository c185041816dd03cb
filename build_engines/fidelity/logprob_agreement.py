"""Whether a numerics setting's top_logprobs describe the token the pipeline sampled.

OpenVINO GenAI 2026.4.1 computes only the chosen token's log prob (`GenerationConfig.logprobs`
above 1 acts as 1; no logits hook), so the served alternatives come from a second pass: the
engine's IR compiled with the same properties and run over each sequence's tokens
(model_repository/engines/openvino/ir_scorer.py).  Its kernels are not the pipeline's (the IR's
own attention over its stateful cache, not paged attention).  With f32 activations the two agree
to within rounding; under dynamic quantization or bf16 the small differences move int8 rounding
and the scorer's distribution is another one: measured on an Intel Xeon with AMX, its top-1 was
not the greedy token at 3 of 105 positions and the sampled token's two log probs differed by up
to 0.12 nats.

This runs the served path on this host for one setting: greedy answers through the pipeline
(its own log prob per token), each fed to the scorer one response at a time as the engine model
feeds it, and compares.  A setting agrees when the greedy token is the scorer's top-1 at every
position (a tie within LOGPROB_TOLERANCE aside) and its two log probs are within
LOGPROB_TOLERANCE; the build serves top_logprobs only under a setting that agrees
(build_engines/repository.py), and a response that asks for them takes every log prob from the
scorer's pass (model_repository/engine_step/alternatives.py), so its numbers describe one
distribution.  Measured on a 2-core AMD EPYC (Zen 4, AVX-512 VNNI + bf16), 104 positions: exact
agrees (no mismatch, largest gap 0.0002); dynamic quantization 32 does not (5 positions, 0.17
nats), nor bf16 (1, 0.18) nor a u8 KV cache (0, but 0.09 nats)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from build_engines.fidelity.metrics import log_softmax
from build_engines.openvino.scorer_agreement import LOGPROB_TOLERANCE, LogprobAgreement

AGREEMENT_TOKENS = 32  # greedy tokens per prompt
AGREEMENT_PROMPTS = 4


def compare(sampled: list[int], sampled_log_probs: list[float], scorer_logits: np.ndarray) -> LogprobAgreement:
    """One sequence: the pipeline's greedy tokens and their log probs beside the scorer's logits
    of the same positions ([tokens, vocab])."""
    log_probs = log_softmax(scorer_logits)
    mismatches, gap = 0, 0.0
    for n, (token, pipeline_lp) in enumerate(zip(sampled, sampled_log_probs)):
        mine = log_probs[n, token]
        if mine < log_probs[n].max() - LOGPROB_TOLERANCE:  # a tie within the passes' rounding is a tie
            mismatches += 1
        gap = max(gap, abs(float(mine) - float(pipeline_lp)))
    return LogprobAgreement(len(sampled), mismatches, round(gap, 6))


def combine(parts: list[LogprobAgreement]) -> LogprobAgreement:
    return LogprobAgreement(
        sum(p.positions for p in parts),
        sum(p.top1_mismatches for p in parts),
        max((p.max_gap for p in parts), default=0.0),
    )


def measure(engine_dir: Path, properties: dict[str, object], prompts: list[list[int]], chunk: int) -> LogprobAgreement:
    """The served path for `properties`: `prompts` sent together through the pipeline, greedy,
    AGREEMENT_TOKENS each, then scored as the engine model scores them."""
    import openvino as ov
    import openvino_genai as og

    from build_engines.fidelity.openvino_engine import serving_pipeline
    from model_repository.engines.openvino.ir_scorer import IrScorer

    pipe = serving_pipeline(engine_dir, properties, len(prompts), chunk)
    config = og.GenerationConfig()
    # no min_new_tokens: it masks the end-of-sequence token, so the greedy choice would not be the
    # raw distribution's top-1 the alternatives describe (seen: one position at exact)
    config.max_new_tokens = AGREEMENT_TOKENS
    config.do_sample, config.logprobs = False, 1
    handles = [pipe.add_request(n, ov.Tensor(np.asarray([p], dtype=np.int64)), config) for n, p in enumerate(prompts)]
    steps: list[list[tuple[list[int], list[float]]]] = [[] for _ in prompts]  # each response's tokens
    while pipe.has_non_finished_requests():
        pipe.step()
        for n, handle in enumerate(handles):
            while handle.can_read():
                for out in handle.read().values():
                    if out.generated_ids:
                        steps[n].append((list(out.generated_ids), list(out.generated_log_probs)))
    del pipe
    scorer = IrScorer(engine_dir, properties)
    parts = []
    for prompt, responses in zip(prompts, steps):
        scoring = scorer.start(prompt)
        try:
            for ids, lps in responses:
                parts.append(compare(ids, lps, scoring.extend(ids)))
        finally:
            scoring.close()
    return combine(parts)


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json

    from transformers import AutoTokenizer

    from build_engines.fidelity.evaluate import chat_prompt_ids
    from build_engines.fidelity.openvino_engine import compile_properties
    from build_engines.openvino.numerics import Numerics

    parser = argparse.ArgumentParser(prog="python -m build_engines.fidelity.logprob_agreement", description=__doc__)
    parser.add_argument("--engine-dir", type=Path, required=True)
    parser.add_argument("--tokenizer", type=Path, required=True, help="the checkpoint (its chat template)")
    parser.add_argument("--numerics", type=json.loads, required=True, help="the served setting (JSON)")
    parser.add_argument("--inference-threads", type=int, default=0)
    parser.add_argument("--max-num-batched-tokens", type=int, default=512, help="the served chunk (spec limits)")
    parser.add_argument("--out", type=Path, required=True, help="write the result here (JSON)")
    args = parser.parse_args(argv)
    setting = Numerics.from_dict(args.numerics)
    prompts = chat_prompt_ids(AutoTokenizer.from_pretrained(str(args.tokenizer)), AGREEMENT_PROMPTS)
    properties = compile_properties(args.engine_dir, setting, args.inference_threads)
    result = measure(args.engine_dir, properties, prompts, args.max_num_batched_tokens)
    args.out.write_text(json.dumps({"numerics": setting.to_dict()} | result.to_dict(), indent=2) + "\n")


if __name__ == "__main__":
    main()
