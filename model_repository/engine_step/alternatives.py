"""Top-k alternatives of each generated token (input `top_logprobs`) for an engine whose library
computes only the chosen token's log prob (OpenVINO GenAI 2026.4.1: `GenerationConfig.logprobs`
above 1 acts as 1).  A Scorer runs the model over each sequence's tokens as they are sent, and
AlternativesSink adds the k most likely tokens of every position to the response, and replaces
the library's log prob of each chosen token with the scorer's, so that every number of the
response comes from one distribution (the token's log prob is its entry in the list).  The
scorer's kernels are not the pipeline's: the build serves top_logprobs only under numerics where
the two agree on this host (build_engines/fidelity/logprob_agreement.py).  Nothing here imports
OpenVINO or Triton: the scorer is the backend's (engines/openvino/ir_scorer.py), tests use fakes."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopLogprobs:
    """The k most likely tokens at each of a response's positions, most likely first."""

    ids: np.ndarray  # [tokens, k] int32
    log_probs: np.ndarray  # [tokens, k] float32

    @classmethod
    def empty(cls, k: int) -> "TopLogprobs":
        return cls(np.zeros((0, k), dtype=np.int32), np.zeros((0, k), dtype=np.float32))


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    rows = np.asarray(logits, dtype=np.float64)
    shifted = rows - rows.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _largest(log_probs: np.ndarray, k: int) -> TopLogprobs:
    if k == 0:  # the chosen tokens' log probs only (prompt_logprobs 0)
        return TopLogprobs(np.zeros((len(log_probs), 0), dtype=np.int32), np.zeros((len(log_probs), 0), np.float32))
    part = np.argpartition(-log_probs, k - 1, axis=-1)[:, :k]
    picked = np.take_along_axis(log_probs, part, axis=-1)
    order = np.lexsort((part, -picked), axis=-1)
    ids = np.take_along_axis(part, order, axis=-1)
    return TopLogprobs(ids.astype(np.int32), np.take_along_axis(picked, order, axis=-1).astype(np.float32))


def top_k(logits: np.ndarray, k: int) -> TopLogprobs:
    """Log-softmax of each row of [tokens, vocab] logits (the raw model distribution: no
    temperature or penalties, as output_log_probs) and its k largest entries, largest first
    (ties: the lower token id first)."""
    return _largest(_log_softmax(logits), k)


def scored(logits: np.ndarray, ids: Sequence[int], k: int) -> tuple[TopLogprobs, list[float]]:
    """top_k of each row, and the log prob of each row's chosen token (ids) in the same rows."""
    log_probs = _log_softmax(logits)
    chosen = log_probs[np.arange(len(ids)), np.asarray(ids, dtype=np.int64)].astype(np.float32)
    return _largest(log_probs, k), [float(v) for v in chosen]


class Scoring(Protocol):
    """One sequence: the prompt, then its generated tokens in order."""

    def extend(self, ids: Sequence[int]) -> np.ndarray: ...  # [len(ids), vocab]: the logits that predicted each

    def close(self) -> None: ...


class Scorer(Protocol):
    def start(self, prompt: Sequence[int]) -> Scoring: ...


class AlternativesSink:
    """A ResponseSink that adds each response's top-k (`top`) and forwards it to `sink`; one
    Scoring per sequence (num_return_sequences), closed with the sequence's final response.
    Sends and fails come from the engine's step thread, as the scoring does."""

    def __init__(self, sink, scorer: Scorer, prompt: Sequence[int], k: int) -> None:
        self._sink, self._scorer, self._prompt, self._k = sink, scorer, tuple(prompt), k
        self._scorings: dict[int, Scoring] = {}
        self._shift: dict[int, float] = {}  # per sequence: the scorer's cum log prob minus the library's
        self._failed = False

    def is_cancelled(self) -> bool:
        return self._failed or self._sink.is_cancelled()

    def send(self, ids, log_probs, cum_log_prob, final, sequence=0, top=None) -> None:
        if self._failed:
            return
        try:
            scoring = self._scorings.get(sequence)
            if scoring is None:
                scoring = self._scorings[sequence] = self._scorer.start(self._prompt)
            if len(ids):
                top, own = scored(scoring.extend(ids), ids, self._k)
            else:
                top, own = TopLogprobs.empty(self._k), []
        except Exception as e:  # this request fails alone; the engine's step goes on
            log.exception("scoring top_logprobs failed")
            self.fail(f"computing top_logprobs failed: {e}")
            return
        shift = self._shift.get(sequence, 0.0) + sum(own) - sum(float(v) for v in log_probs)
        self._shift[sequence] = shift
        if final:
            self._scorings.pop(sequence).close()
        self._sink.send(ids, own, cum_log_prob + shift, final, sequence, top=top)

    def fail(self, message, code=None) -> None:
        if self._failed:
            return
        self._failed = True
        for scoring in self._scorings.values():
            scoring.close()
        self._scorings.clear()
        if code is None:
            self._sink.fail(message)
        else:
            self._sink.fail(message, code)
