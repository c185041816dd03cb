"""The n samples of one engine request (num_return_sequences): each sequence's tokens, log
probs and what was sent of them, and the views that let one sink answer for each."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence


@dataclass
class SampleState:
    """One of a request's num_return_sequences samples."""

    generated: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    cum_log_prob: float = 0.0
    sent: int = 0  # tokens already sent (streaming)

    def take(self, ids: Sequence[int], lps: Sequence[float]) -> None:
        for token, lp in zip(ids, lps or [0.0] * len(ids)):
            self.generated.append(token)
            self.log_probs.append(lp)
            self.cum_log_prob += lp

    def send_pending(self, sink, index: int, final: bool) -> None:
        sink.send(self.generated[self.sent :], self.log_probs[self.sent :], self.cum_log_prob, final, sequence=index)
        self.sent = len(self.generated)


def read_sequences(handle, n: int) -> dict[int, tuple[list[int], list[float]]]:
    """New ids and log probs per sequence index (backends with n > 1 have read_sequences())."""
    if n == 1:
        return {0: handle.read()}
    return handle.read_sequences()


class SequenceView:
    """One sequence of a ResponseSink, for a request that samples it alone."""

    def __init__(self, sink, index: int) -> None:
        self._sink, self._index = sink, index

    def is_cancelled(self) -> bool:
        return self._sink.is_cancelled()

    def send(self, ids, log_probs, cum_log_prob, final, sequence: int = 0, top=None) -> None:
        self._sink.send(ids, log_probs, cum_log_prob, final, sequence=self._index, top=top)

    def fail(self, message: str, code=None) -> None:
        if code is None:
            self._sink.fail(message)
        else:
            self._sink.fail(message, code)
