"""Allowed ranges of the request parameters, checked by preprocessing (and by the client
and the OpenAI front before they send anything).  One rule per field, one message format."""

from __future__ import annotations

import math
from dataclasses import dataclass


class InvalidParameter(ValueError):
    """A request field has a value outside its allowed range."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"invalid '{field}': {message}")
        self.field = field


@dataclass(frozen=True)
class NumberRule:
    field: str
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    integer: bool = False

    def describe(self) -> str:
        lo = "(-inf" if self.low is None else ("[" if self.low_inclusive else "(") + _fmt(self.low)
        hi = "inf)" if self.high is None else _fmt(self.high) + ("]" if self.high_inclusive else ")")
        return f"{lo}, {hi}"

    def check(self, value: float | int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidParameter(self.field, f"expected a number, got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidParameter(self.field, f"{value} is not a finite number")
        if self.integer and int(value) != value:
            raise InvalidParameter(self.field, f"{value} is not an integer")
        too_low = self.low is not None and (value < self.low or (value == self.low and not self.low_inclusive))
        too_high = self.high is not None and (value > self.high or (value == self.high and not self.high_inclusive))
        if too_low or too_high:
            raise InvalidParameter(self.field, f"{_fmt(value)} is outside the allowed range {self.describe()}")


def _fmt(x: float | int) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


UINT64_MAX = 2**64 - 1

RULES: dict[str, NumberRule] = {
    r.field: r
    for r in (
        NumberRule("max_tokens", low=1, integer=True),
        NumberRule("min_tokens", low=0, integer=True),
        NumberRule("top_k", low=0, integer=True),
        NumberRule("top_p", low=0.0, high=1.0),  # 0: not used (TensorRT-LLM's default), as NVIDIA's clients send it
        NumberRule("temperature", low=0.0, high=100.0),
        NumberRule("repetition_penalty", low=0.0, high=100.0, low_inclusive=False),
        NumberRule("presence_penalty", low=-2.0, high=2.0),
        NumberRule("frequency_penalty", low=-2.0, high=2.0),
        NumberRule("seed", low=0, high=UINT64_MAX, integer=True),
        NumberRule("priority", low=0.0, high=1.0),  # engine_step/admission.py: higher first, 0.5 default
    )
}

MAX_STOP_WORDS = 64  # per request; each becomes a row of the engine's stop_words_list
MAX_STOP_WORD_CHARS = 256


def check(field: str, value: float | int) -> None:
    RULES[field].check(value)


def check_words(field: str, words: list[str]) -> None:
    if len(words) > MAX_STOP_WORDS:
        raise InvalidParameter(field, f"{len(words)} entries; at most {MAX_STOP_WORDS} are allowed")
    for w in words:
        if not w:
            raise InvalidParameter(field, "entries must be non-empty strings")
        if len(w) > MAX_STOP_WORD_CHARS:
            raise InvalidParameter(field, f"an entry has {len(w)} characters; at most {MAX_STOP_WORD_CHARS}")
