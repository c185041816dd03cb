"""The prompt's log probs (input prompt_logprobs): the scorer that computes the top-k alternatives
(alternatives.Scorer: the engine's IR under its served numerics) run over the prompt, so that a
prompt token scored here and the same token generated with top_logprobs get one number.  Each
prompt token's log prob given the tokens before it, and the k most likely tokens at its position;
the first token has none (nothing predicts it): NaN, as vLLM's first prompt entry is None.
Computed once per request, before the engine takes it (on the model's execute thread, not the
engine's step thread).  Nothing here imports OpenVINO or Triton."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from model_repository.engine_step.alternatives import Scorer, TopLogprobs, scored

CHUNK_TOKENS = 256  # prompt tokens scored per pass: [chunk, vocab] float32 logits at a time


@dataclass(frozen=True)
class PromptLogprobs:
    ids: np.ndarray  # [prompt] int32: the prompt as the engine got it
    log_probs: np.ndarray  # [prompt] float32: each token's log prob given the ones before it; [0] NaN
    top: TopLogprobs  # [prompt, k]: the most likely tokens at each position, first row -1 / NaN


def score_prompt(scorer: Scorer, prompt: Sequence[int], k: int, chunk: int = CHUNK_TOKENS) -> PromptLogprobs:
    """The prompt's log probs and k alternatives per position (k >= 0), `chunk` tokens at a time."""
    ids = [int(t) for t in prompt]
    own: list[float] = [float("nan")]
    top_ids = [np.full((1, k), -1, dtype=np.int32)]
    top_lps = [np.full((1, k), np.nan, dtype=np.float32)]
    scoring = scorer.start(ids[:1])
    try:
        for a in range(1, len(ids), chunk):
            part = ids[a : a + chunk]
            top, chosen = scored(scoring.extend(part), part, k)
            own += chosen
            top_ids.append(top.ids)
            top_lps.append(top.log_probs)
    finally:
        scoring.close()
    return PromptLogprobs(
        np.asarray(ids, dtype=np.int32),
        np.asarray(own, dtype=np.float32),
        TopLogprobs(np.concatenate(top_ids), np.concatenate(top_lps)),
    )
