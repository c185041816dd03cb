"""Why a generation ended, as reported in the `finish_reason` output."""

from __future__ import annotations

import enum


class FinishReason(str, enum.Enum):
    NONE = ""  # still running
    STOP = "stop"  # end-of-sequence token or stop string
    LENGTH = "length"  # max_tokens reached
    CANCELLED = "cancelled"  # the client went away or cancelled

    @classmethod
    def parse(cls, value: str) -> "FinishReason":
        return cls(value)
