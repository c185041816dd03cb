"""What one executor result holds (LlmRequest::createResult) and the response tensors it
becomes (ModelInstanceState::fillTritonResponse).

The CPU engine hands over the tokens it produced, the end id included; upstream's decoder
never outputs the end id (row output.end_id_not_in_output), so it is dropped here, while the
cumulative log prob keeps its share as upstream's does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Sequence

import numpy as np

from contract.upstream.backend_semantics import BackendSemantics
from standins.trtllm.upstream import UpstreamError

OUTPUT_IDS, SEQUENCE_LENGTH = "output_ids", "sequence_length"
OUTPUT_LOG_PROBS, CUM_LOG_PROBS = "output_log_probs", "cum_log_probs"
BATCH_INDEX, SEQUENCE_INDEX = "batch_index", "sequence_index"


@dataclass(frozen=True)
class Result:
    output_ids: tuple[int, ...]  # one beam
    log_probs: tuple[float, ...] | None  # None unless return_log_probs
    cum_log_prob: float | None
    final: bool  # Result.isFinal: the request's last result (every sequence done; row output.sequence_results)
    sequence_index: int = 0  # Result.sequenceIndex, 0 <= it < num_return_sequences
    num_sequences: int = 1  # the request's num_return_sequences


@dataclass
class RowState:
    """The stand-in's LlmRequest: what the executor knows of one running request."""

    prompt: tuple[int, ...]
    streaming: bool
    exclude_input: bool
    end_id: int | None
    return_log_probs: bool
    generated: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    sent: int = 0  # getMaxSentTokenLen, counted past the prompt

    def add(self, ids: Sequence[int], log_probs: Sequence[float], cum_log_prob: float, final: bool) -> Result:
        """New tokens of this sequence from the engine -> the result upstream would create now
        (`final`: this sequence's last; the executor decides the request's isFinal)."""
        self.generated.extend(int(t) for t in ids)
        self.log_probs.extend(float(v) for v in (log_probs or [0.0] * len(ids)))
        if final and self.end_id is not None and self.end_id >= 0 and self.generated and self.generated[-1] == self.end_id:
            self.generated.pop()  # row output.end_id_not_in_output
            self.log_probs.pop()
        return self._create_result(cum_log_prob, final)

    def _create_result(self, cum_log_prob: float, final: bool) -> Result:
        """Row output.token_window (calculateNbTokensOut): streaming -> the tokens since the
        previous response; otherwise every token, the prompt first unless excluded."""
        if self.streaming:
            tokens = tuple(self.generated[self.sent:])
        else:
            tokens = (() if self.exclude_input else self.prompt) + tuple(self.generated)
        self.sent = len(self.generated)
        if not self.return_log_probs:
            return Result(tokens, None, None, final)
        return Result(tokens, tuple(self.log_probs), cum_log_prob, final)  # row output.log_probs_window


def response_arrays(sem: BackendSemantics, result: Result, requested: Collection[str], *,
                    batch_index: int = 0, batch_size: int = 1) -> dict[str, np.ndarray]:
    """The response tensors, shaped as upstream sends them (rows output.*); the leading 1 is
    the batch dimension of a one-row response."""
    for name in (OUTPUT_IDS, SEQUENCE_LENGTH):  # row error.required_outputs
        if name not in requested:
            rule = sem.error("error.required_outputs")
            raise UpstreamError(rule.id, rule.code, rule.render(name=name))
    n = len(result.output_ids)
    out = {OUTPUT_IDS: np.asarray(result.output_ids, dtype=np.int32).reshape(1, 1, n),  # [1, beams, len]
           SEQUENCE_LENGTH: np.array([[n]], dtype=np.int32)}  # [1, beams]
    if result.log_probs is not None and OUTPUT_LOG_PROBS in requested:
        out[OUTPUT_LOG_PROBS] = np.asarray(result.log_probs, dtype=np.float32).reshape(1, 1, -1)
    if result.cum_log_prob is not None and CUM_LOG_PROBS in requested:
        out[CUM_LOG_PROBS] = np.array([[result.cum_log_prob]], dtype=np.float32)
    if BATCH_INDEX in requested and batch_size > 1:  # row output.batch_index
        out[BATCH_INDEX] = np.array([[batch_index]], dtype=np.int32)
    if SEQUENCE_INDEX in requested and result.num_sequences > 1:  # row output.sequence_index
        out[SEQUENCE_INDEX] = np.array([[result.sequence_index]], dtype=np.int32)
    return out
