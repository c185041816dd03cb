"""Checks of an engine request at the engine model's entry (NVIDIA's clients call the engine
model directly), against the built engine's limits, before it is queued.  Every rule is a
function of contract/params.py, the same one preprocessing calls for the ensemble's field;
nothing is checked here that is not checked there, in the same words."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial as p

from contract import params
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
        if r.input_lengths != n:
            out.append(f"'input_lengths' is {r.input_lengths} but 'input_ids' has {n} tokens")
        ranges = [
            p(params.check, field, getattr(r, name), name)
            for name, field in params.ENGINE_RULES.items()
            if hasattr(r, name) and name != "temperature"
        ]
        out += params.problems(*ranges)
        if out:  # the cross-field checks below take the ranges for granted
            return list(dict.fromkeys(out))
        out += params.problems(
            p(params.check_top_k, r.runtime_top_k, self.vocab_size, "runtime_top_k"),
            p(params.check_sampling_temperature, r.temperature, r.is_greedy),
            p(
                params.check_lengths,
                n,
                r.request_output_len,
                self.max_input_len,
                self.max_seq_len,
                prompt_name="input_ids",
                max_name="request_output_len",
            ),
            p(params.check_min_tokens, r.min_tokens, r.request_output_len, "request_output_len"),
            p(params.check_token_ids, "input_ids", r.input_ids, self.vocab_size),
            p(params.check_token_ids, "stop_words_list", [t for w in r.stop_words_list for t in w], self.vocab_size),
            p(params.check_token_ids, "bad_words_list", [t for w in r.bad_words_list for t in w], self.vocab_size),
            *([p(params.check_token_id, "end_id", r.end_id, self.vocab_size)] if r.end_id != -1 else []),
        )
        if r.options.guided_decoding_guide_type:
            out += guide_problems(r.options.guided_decoding_guide_type, r.options.guided_decoding_guide)
        return list(dict.fromkeys(out))
