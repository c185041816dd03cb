"""SamplingParams as the table declares it: every field, in order, with its default (rows
sampling.field.*), __post_init__ (row sampling.post_init) and the construction checks with
upstream's texts (rows sampling.validate.*).  A keyword that is not a field fails with
Python's own TypeError, as the real dataclass does."""

from __future__ import annotations

import dataclasses
import os

from .._upstream import API, error


def _post_init(self) -> None:
    if self.pad_id is None:  # row sampling.post_init
        self.pad_id = self.end_id
    if self.best_of is None:
        self.best_of = self.n
    self.logprobs = self.logprobs and int(self.logprobs)  # row sampling.logprobs_int
    self.prompt_logprobs = self.prompt_logprobs and int(self.prompt_logprobs)
    _validate(self)


def _validate(self) -> None:
    if self.best_of < self.n:
        raise ValueError(error("sampling.validate.best_of", best_of=self.best_of, n=self.n))
    if self.top_p is not None and not 0 <= self.top_p <= 1:
        raise ValueError(error("sampling.validate.top_p", top_p=self.top_p))
    if self.top_k is not None and self.top_k < 0:
        raise ValueError(error("sampling.validate.top_k", top_k=self.top_k))
    if self.temperature is not None and self.temperature < 0:
        raise ValueError(error("sampling.validate.temperature", temperature=self.temperature))
    if (self.best_of > 1 and _greedy(self) and not self.use_beam_search
            and not os.environ.get("TLLM_ALLOW_N_GREEDY_DECODING")):
        raise ValueError(error("sampling.validate.greedy_best_of", best_of=self.best_of))
    if self.truncate_prompt_tokens is not None and self.truncate_prompt_tokens < 1:
        raise ValueError(error("sampling.validate.truncate_prompt_tokens",
                               truncate_prompt_tokens=self.truncate_prompt_tokens))


def _greedy(self) -> bool:
    """Row sampling.greedy."""
    if self.use_beam_search:
        return False
    return ((self.temperature is None and self.top_p is None and self.top_k is None)
            or self.top_k == 1 or self.top_p == 0.0 or self.temperature == 0)


SamplingParams = dataclasses.make_dataclass(
    "SamplingParams",
    [(f.name, object, dataclasses.field(default=f.default)) for f in API.sampling_fields.values()],
    namespace={"__post_init__": _post_init, "is_greedy": property(_greedy),
               "__module__": "tensorrt_llm.sampling_params"},
)
