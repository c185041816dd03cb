"""Checks of an engine request against the built engine's limits, before it is queued."""

from __future__ import annotations

from dataclasses import dataclass

from contract.guided import guide_problems
from model_repository.engine_step.engine_inputs import EngineInputs


@dataclass(frozen=True)
class EngineRequestCheck:
    max_input_len: int
    max_seq_len: int
    vocab_size: int

    def problems(self, r: EngineInputs) -> list[str]:
        out = []
        n = len(r.input_ids)
        if n == 0:
            out.append("'input_ids' is empty")
        if r.input_lengths != n:
            out.append(f"'input_lengths' is {r.input_lengths} but 'input_ids' has {n} tokens")
        if n > self.max_input_len:
            out.append(f"'input_ids' has {n} tokens; max_input_len is {self.max_input_len}")
        if r.request_output_len < 1:
            out.append(f"'request_output_len' must be >= 1, got {r.request_output_len}")
        elif n + r.request_output_len > self.max_seq_len:
            out.append(f"'request_output_len' {r.request_output_len} + {n} prompt tokens exceeds max_seq_len {self.max_seq_len}")
        bad_ids = [t for t in r.input_ids if not 0 <= t < self.vocab_size]
        if bad_ids:
            out.append(f"'input_ids' holds ids outside the vocabulary [0, {self.vocab_size}): {bad_ids[:5]}")
        if r.min_tokens < 0 or r.min_tokens > r.request_output_len:
            out.append(f"'min_tokens' must be in [0, request_output_len], got {r.min_tokens}")
        if r.temperature <= 0 and not r.is_greedy:
            out.append(f"'temperature' must be > 0 when sampling, got {r.temperature}")
        if not 0.0 <= r.runtime_top_p <= 1.0:
            out.append(f"'runtime_top_p' must be in [0, 1], got {r.runtime_top_p}")
        if r.runtime_top_k < 0:
            out.append(f"'runtime_top_k' must be >= 0, got {r.runtime_top_k}")
        if r.repetition_penalty <= 0:
            out.append(f"'repetition_penalty' must be > 0, got {r.repetition_penalty}")
        for words_field, words in (("stop_words_list", r.stop_words_list), ("bad_words_list", r.bad_words_list)):
            if any(not 0 <= t < self.vocab_size for w in words for t in w):
                out.append(f"'{words_field}' holds ids outside the vocabulary")
        if r.options.guided_decoding_guide_type:
            out += guide_problems(r.options.guided_decoding_guide_type, r.options.guided_decoding_guide)
        return out
