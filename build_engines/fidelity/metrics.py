"""The fidelity metrics, as plain numpy: what llama.cpp's `llama-perplexity --kl-divergence`
reports, computed from two sets of logits over the same tokens.

Shapes: logits are [T, V] (T scored positions, V vocabulary), targets [T] (the token that
follows each position).  Everything is float64 once reduced, so the math does not depend on
the engines' own precision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """log p over the last axis, stable for any logit range.  [T, V] -> [T, V] (float64)."""
    x = np.asarray(logits, dtype=np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def kl_divergence(ref_logprobs: np.ndarray, test_logprobs: np.ndarray) -> np.ndarray:
    """KL(P_ref || P_test) per position, in nats: sum_v p_ref(v) (log p_ref(v) - log p_test(v)).
    The reference is the distribution we want to keep (llama.cpp's convention).  [T, V] -> [T]"""
    p = np.exp(ref_logprobs)
    return np.maximum((p * (ref_logprobs - test_logprobs)).sum(axis=-1), 0.0)


def token_nll(logprobs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """-log p(target) per position.  [T, V], [T] -> [T]"""
    return -logprobs[np.arange(len(targets)), targets]


def perplexity(nll: np.ndarray) -> float:
    """exp of the mean negative log-likelihood (natural log)."""
    return float(math.exp(float(np.mean(nll))))


def first_difference(reference: list[int], test: list[int]) -> int | None:
    """Index of the first token where two greedy answers part ways; None if one is a prefix of
    the other (equal up to the shorter, e.g. both stopped at EOS at the same place)."""
    for i, (a, b) in enumerate(zip(reference, test)):
        if a != b:
            return i
    if len(reference) != len(test):
        return min(len(reference), len(test))
    return None


ROWS_PER_BLOCK = 32  # positions reduced at a time (32 x 49152 float64: 12.6 MB)


@dataclass
class LogitComparison:
    """Accumulates per-position statistics window by window, without keeping any logits."""

    kld: list[np.ndarray] = field(default_factory=list)
    ref_nll: list[np.ndarray] = field(default_factory=list)
    test_nll: list[np.ndarray] = field(default_factory=list)
    same_top1: list[np.ndarray] = field(default_factory=list)

    def add(self, ref_logits: np.ndarray, test_logits: np.ndarray, targets: np.ndarray) -> None:
        """One window's scored positions: ref/test logits [T, V], targets [T]."""
        if ref_logits.shape != test_logits.shape or ref_logits.shape[0] != len(targets):
            raise ValueError(
                f"shapes differ: reference {ref_logits.shape}, test {test_logits.shape}, targets {np.shape(targets)}"
            )
        # In blocks of rows: [1023, 49152] float64 temporaries are 400 MB each, and allocating
        # them (page faults) took longer than the math; a block's stay small.
        for a in range(0, len(targets), ROWS_PER_BLOCK):
            ref, test, tgt = (
                ref_logits[a : a + ROWS_PER_BLOCK],
                test_logits[a : a + ROWS_PER_BLOCK],
                targets[a : a + ROWS_PER_BLOCK],
            )
            ref_lp, test_lp = log_softmax(ref), log_softmax(test)
            self.kld.append(kl_divergence(ref_lp, test_lp))
            self.ref_nll.append(token_nll(ref_lp, tgt))
            self.test_nll.append(token_nll(test_lp, tgt))
            self.same_top1.append(ref.argmax(-1) == test.argmax(-1))

    @property
    def tokens(self) -> int:
        return int(sum(len(k) for k in self.kld))

    def summary(self) -> dict[str, float]:
        kld = np.concatenate(self.kld)
        ref_ppl = perplexity(np.concatenate(self.ref_nll))
        test_ppl = perplexity(np.concatenate(self.test_nll))
        return {
            "scored_tokens": self.tokens,
            "reference_ppl": ref_ppl,
            "engine_ppl": test_ppl,
            "ppl_change_pct": 100.0 * (test_ppl / ref_ppl - 1.0),
            "mean_kld": float(kld.mean()),
            "p99_kld": float(np.percentile(kld, 99)),
            "max_kld": float(kld.max()),
            "same_top1_pct": 100.0 * float(np.concatenate(self.same_top1).mean()),
        }


def greedy_summary(pairs: list[tuple[list[int], list[int]]]) -> dict[str, float]:
    """Greedy answers of reference and engine, prompt by prompt: how many are equal, and where
    the others first differ (an equal answer counts as its full length)."""
    firsts = [first_difference(ref, test) for ref, test in pairs]
    depth = [len(ref) if f is None else f for f, (ref, _) in zip(firsts, pairs)]
    return {
        "prompts": len(pairs),
        "equal": sum(f is None for f in firsts),
        "first_difference_mean": float(np.mean(depth)) if depth else 0.0,
        "first_token_differs": sum(f == 0 for f in firsts),
    }
