"""A request's samples (SamplingParams.n) as the LLM API streams them: what is new in each
CompletionOutput since the engine last read it, and what each sample sent so far.

Upstream (NVIDIA/TensorRT-LLM tensorrt_llm/executor/result.py, read at a678b91a: the v1.2.1
file itself is not stored; older and newer versions agree; the stand-in reproduces it in
standins/llmapi/trtllm_llmapi/executor/result.py):

- One sequence per response: `_handle_response` hands a response to `_handle_sequence` for its
  `sequence_index` only (505-515), and only that output's `_last_token_ids_len` /
  `_last_logprobs_len` move (352, 372).  Every other output's token_ids_diff / logprobs_diff
  still hold what its own last response added: read at every step, they repeat tokens.  So
  the engine reads each output by position - `token_ids[taken:]` (outside beam search
  token_ids is the whole sequence, 357) and the log prob entries at the same positions
  (the response carries every log prob so far, 370-390).
- best_of > n: `outputs` sorts all best_of outputs by cumulative log prob and renumbers them at
  every read (311-327), so which sequence is sample i changes while they run.  Such a request
  is read once, from the final outputs, each sample whole.
- Stop words are cut from token_ids only in the response that is the request's last (413-424).
  With n > 1 a sample that ends on a stop token earlier keeps it; the one-sample request does
  not.  The engine holds a trailing single-token stop back until its sample goes on (a stop
  before min_tokens does not end it) and drops it at the end, so every sample ends as it
  would alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from model_repository.engine_step.alternatives import TopLogprobs


@dataclass
class Sample:
    """One of a request's num_return_sequences samples, as the engine sends it."""

    generated: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    cum_log_prob: float = 0.0
    sent: int = 0
    top_ids: list[list[int]] = field(default_factory=list)  # top_logprobs: each token's alternatives
    top_log_probs: list[list[float]] = field(default_factory=list)

    def top(self, k: int) -> TopLogprobs | None:
        """The alternatives of the tokens not sent yet (None when none were asked for)."""
        if not k:
            return None
        return TopLogprobs(
            np.asarray(self.top_ids[self.sent :], dtype=np.int32).reshape(-1, k),
            np.asarray(self.top_log_probs[self.sent :], dtype=np.float32).reshape(-1, k),
        )


@dataclass
class NewTokens:
    """A sample's tokens read in one step, with the LLM's log prob entries for them ([] when
    none were asked for)."""

    ids: list[int] = field(default_factory=list)
    entries: list[Any] = field(default_factory=list)


@dataclass
class Cursor:
    """Where the engine is in one CompletionOutput."""

    stop_ids: frozenset[int]
    taken: int = 0  # tokens of token_ids read (passed on or held)
    held: NewTokens = field(default_factory=NewTokens)  # a trailing stop token not passed on yet

    def read(self, completion: Any) -> NewTokens:
        token_ids = list(completion.token_ids or ())
        ids = [int(t) for t in token_ids[self.taken :]]
        entries = list((completion.logprobs or ())[self.taken : self.taken + len(ids)])
        self.taken = max(self.taken, len(token_ids))
        # log prob entries come for every token or for none (SamplingParams.logprobs unset)
        entries = self.held.entries + entries if len(entries) == len(ids) else []
        ids = self.held.ids + ids
        cut = len(ids) - 1 if ids and ids[-1] in self.stop_ids else len(ids)
        self.held = NewTokens(ids[cut:], entries[cut:])
        return NewTokens(ids[:cut], entries[:cut])


class SampleReader:
    """Reads a request's outputs, step by step, into new tokens per sample."""

    def __init__(self, n: int, best_of: int | None, stop_ids: Sequence[int] = ()) -> None:
        self._stop_ids = frozenset(stop_ids)
        self._whole = (best_of or n) > n  # best_of > n: the samples are known at the end only
        self._cursors = [Cursor(self._stop_ids) for _ in range(n)]

    def read(self, outputs: Sequence[Any], finished: bool) -> list[NewTokens]:
        """What each sample gained in this step (`outputs`: the RequestOutput's, read once)."""
        if not self._whole:
            return [cursor.read(out) for cursor, out in zip(self._cursors, outputs)]
        if not finished:
            return [NewTokens() for _ in self._cursors]
        return [Cursor(self._stop_ids).read(out) for out in outputs]  # the best n, in rank order
