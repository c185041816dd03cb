"""Why a generation ended, as reported in the `finish_reason` output, and where the engine's
token stream ends (TensorRT-LLM's output contract has no finish-reason tensor: docs/contract.md,
"Where a stream ends")."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Collection, Sequence


class FinishReason(str, enum.Enum):
    NONE = ""  # still running
    STOP = "stop"  # end-of-sequence token or stop string
    LENGTH = "length"  # max_tokens reached
    CANCELLED = "cancelled"  # the client went away or cancelled

    @classmethod
    def parse(cls, value: str) -> "FinishReason":
        return cls(value)


@dataclass(frozen=True)
class TokensEnd:
    """Where one engine response's new token ids end the generation, if they do."""

    counted: int  # of the response's ids, how many count as generated (an end id among them)
    finish: FinishReason  # NONE (more may come), STOP (an end id), LENGTH (max_tokens reached)

    @property
    def text_ids(self) -> int:
        """How many of the counted ids are text: an end id counts as generated but is never text."""
        return self.counted - 1 if self.finish == FinishReason.STOP else self.counted


def tokens_end(ids: Sequence[int], end_ids: Collection[int], room: int) -> TokensEnd:
    """`ids`: an engine response's new tokens; `end_ids`: the ids that end a sequence (the engines
    that keep an end id in their output: the CPU engine; TensorRT-LLM leaves it out and ends the
    stream instead); `room`: how many tokens max_tokens still allows."""
    for n, token in enumerate(ids):
        if token in end_ids:
            return TokensEnd(n + 1, FinishReason.STOP)
    if len(ids) >= room:
        return TokensEnd(room, FinishReason.LENGTH)
    return TokensEnd(len(ids), FinishReason.NONE)
