"""Allowed values of the request parameters: the one implementation of every range check.

Each field has one rule here, and every place where a request enters the server calls it:
preprocessing (the ensemble's and the BLS's entry: model_repository/text/generate_request.py
and preprocessor.py) and the engine models (their own entry, since NVIDIA's clients call
`tensorrt_llm` directly: model_repository/engine_step/request_check.py and
engine_inputs.GenerationOptions).  The client (client/request_builder.py) calls the same
functions to refuse a bad value before it sends anything.  Later hops trust the typed value
and check nothing again.  The engine contract names three fields differently
(ENGINE_NAMES); its checks pass its own name, so the message names the tensor that was sent
and is otherwise the same.  One message format: "invalid '<field>': <why>".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

from contract import sampling_fields
from contract.tensors import MAX_TOP_LOGPROBS


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

    def check(self, value: float | int, name: str | None = None) -> None:
        """`name`: the field's name where it was sent (the engine contract's, ENGINE_NAMES)."""
        field = name or self.field
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidParameter(field, f"expected a number, got {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidParameter(field, f"{value} is not a finite number")
        if self.integer and int(value) != value:
            raise InvalidParameter(field, f"{value} is not an integer")
        too_low = self.low is not None and (value < self.low or (value == self.low and not self.low_inclusive))
        too_high = self.high is not None and (value > self.high or (value == self.high and not self.high_inclusive))
        if too_low or too_high:
            raise InvalidParameter(field, f"{_fmt(value)} is outside the allowed range {self.describe()}")


def _fmt(x: float | int) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


RULES: dict[str, NumberRule] = {
    r.field: r
    for r in (
        NumberRule("max_tokens", low=1, integer=True),
        # the sampling fields' rules: contract/sampling_fields.py
        *(NumberRule(f.name, **dataclasses.asdict(f.range)) for f in sampling_fields.FIELDS),
        NumberRule("priority", low=0.0, high=1.0),  # engine_step/admission.py: higher first, 0.5 default
        NumberRule("num_return_sequences", low=1, integer=True),  # the client's `n`
        NumberRule("top_logprobs", low=0, high=MAX_TOP_LOGPROBS, integer=True),
        NumberRule("prompt_logprobs", low=-1, high=MAX_TOP_LOGPROBS, integer=True),  # -1: none
    )
}

# The engine contract's name of a field whose rule it shares (contract/tensors.py ENGINE_CORE_INPUTS).
ENGINE_NAMES: dict[str, str] = {
    "max_tokens": "request_output_len",
    **{f.name: f.engine_name for f in sampling_fields.FIELDS if f.engine_name != f.name},
}
# Engine inputs checked by a rule of RULES (the other fields keep their names).
ENGINE_RULES: dict[str, str] = {ENGINE_NAMES.get(f, f): f for f in RULES}

MAX_STOP_WORDS = 64  # per request; each becomes a row of the engine's stop_words_list
MAX_STOP_WORD_CHARS = 256


def check(field: str, value: float | int, name: str | None = None) -> None:
    """The rule of `field` (a RULES key); `name`: how the request spelled it, if not so."""
    RULES[field].check(value, name)


def implied_top_p(temperature: float | None, top_k: int | None, top_p: float | None) -> float | None:
    """The top_p a caller that speaks OpenAI's API means: there a temperature alone samples, while
    NVIDIA's ensemble contract samples only with top_k > 1 or top_p > 0, so a temperature with
    neither set asks for the whole distribution (top_p 1.0).  Our client and the Dynamo worker
    (cluster/dynamo_request.py) send what this returns."""
    if temperature and top_k is None and top_p is None:
        return 1.0
    return top_p


def check_words(field: str, words: list[str]) -> None:
    if len(words) > MAX_STOP_WORDS:
        raise InvalidParameter(field, f"{len(words)} entries; at most {MAX_STOP_WORDS} are allowed")
    for i, w in enumerate(words):
        if not w:
            raise InvalidParameter(
                field, f"entry {i} is empty; entries must be non-empty strings (send none for no words)"
            )
        if len(w) > MAX_STOP_WORD_CHARS:
            raise InvalidParameter(field, f"an entry has {len(w)} characters; at most {MAX_STOP_WORD_CHARS}")


def check_min_tokens(min_tokens: int, max_tokens: int, max_name: str = "max_tokens") -> None:
    if min_tokens > max_tokens:
        raise InvalidParameter("min_tokens", f"{min_tokens} is greater than {max_name} ({max_tokens})")


def check_lengths(
    prompt_tokens: int,
    max_tokens: int,
    max_input_len: int,
    max_seq_len: int,
    *,
    prompt_name: str = "text_input",
    max_name: str = "max_tokens",
) -> None:
    """The prompt and the tokens to generate against the engine's build limits."""
    if prompt_tokens == 0:
        raise InvalidParameter(prompt_name, "the prompt encodes to no tokens")
    if prompt_tokens > max_input_len:
        raise InvalidParameter(
            prompt_name,
            f"the prompt has {prompt_tokens} tokens; this engine accepts at most {max_input_len} (max_input_len)",
        )
    room = max_seq_len - prompt_tokens
    if max_tokens > room:
        raise InvalidParameter(
            max_name,
            f"{max_tokens} is too large: the prompt has {prompt_tokens} tokens and the "
            f"engine's max_seq_len is {max_seq_len}, so at most {room} can be generated",
        )


def check_token_id(field: str, token: int, vocab_size: int) -> None:
    if not 0 <= token < vocab_size:
        raise InvalidParameter(field, f"{token} is not a token id (vocabulary size {vocab_size})")


def check_token_ids(field: str, ids: Sequence[int], vocab_size: int) -> None:
    bad = [t for t in ids if not 0 <= t < vocab_size]
    if bad:
        raise InvalidParameter(field, f"holds ids outside the vocabulary [0, {vocab_size}): {bad[:5]}")


def check_top_k(top_k: int, vocab_size: int, name: str = "top_k") -> None:
    """top_k against the model's vocabulary (its range: RULES)."""
    if top_k > vocab_size:
        raise InvalidParameter(name, f"{top_k} exceeds the vocabulary size {vocab_size}")


def check_sampling_temperature(temperature: float, greedy: bool) -> None:
    """The engine contract's rule (preprocessing sends temperature 0 as greedy, top_k 1)."""
    check("temperature", temperature)
    if temperature == 0 and not greedy:
        raise InvalidParameter("temperature", "0 with sampling (top_k > 1 or top_p > 0); send top_k 1 for greedy")


def problems(*checks) -> list[str]:
    """Run zero-argument checks; the messages of those that refuse (the engine models answer them all at once)."""
    out = []
    for c in checks:
        try:
            c()
        except InvalidParameter as e:
            out.append(str(e))
    return out
