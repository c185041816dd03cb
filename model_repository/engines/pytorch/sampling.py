"""One engine request (EngineInputs) as SamplingParams keywords of the LLM API.

Every keyword is a SamplingParams field of the upstream table (rows sampling.field.*; a unit
test holds this module to them), and what the LLM API cannot take from token ids is said
here, so the engine model refuses it by name instead of ignoring it.

- The LLM runs without a tokenizer (we tokenize in preprocessing), so end_id is always
  explicit (row llm.end_id.setup); -1 reaches the executor as "no end id" (row
  executor.request), which is what -1 means in our contract too.
- Stop and bad words arrive as token-id sequences.  The LLM API takes ids only as single
  tokens (stop_token_ids, bad_token_ids; row sampling.stop_words: longer words come only
  from strings through a tokenizer).  Single-token stops go to the LLM; longer stop
  sequences are watched by the engine, which aborts the request when one completes (the CPU
  engine does the same); longer bad words cannot be expressed and are refused.
- Greedy is asked for with top_k=1 (row sampling.greedy); when sampling, TensorRT-LLM's
  "0 = not set" for top_k/top_p becomes None, because top_p == 0 would mean greedy there.
- detokenize=False: postprocessing detokenizes (incrementally, byte-exact).
- Fields the deployment's sampler (LLM(sampler_type=...), chosen by the plan) does not apply
  (contract/upstream/data/sampling_support_<version>.json, rows pytorch.*: at 1.2.1 TorchSampler
  ignores the penalties, bad words and min_p, TRTLLMSampler applies the penalties and bad words;
  what it does with min_p was not read) are refused by preprocessing,
  naming the version and the sampler; `problems(r, version, sampler)` refuses them again for
  requests sent to the engine model directly.  A seed cannot be told from the one preprocessing
  draws for every sampled request, so only preprocessing refuses a sent seed.
"""

from __future__ import annotations

from typing import Any

from contract.upstream.sampling_support import EnginePath, sampling_support
from model_repository.engine_step.engine_inputs import EngineInputs

LLM_API = "TensorRT-LLM's LLM API (PyTorch backend)"


def single_token_ids(words: tuple[tuple[int, ...], ...]) -> list[int]:
    return sorted({w[0] for w in words if len(w) == 1})


def sampling_kwargs(r: EngineInputs) -> dict[str, Any]:
    """SamplingParams(**these) for one request."""
    kwargs: dict[str, Any] = {
        "max_tokens": r.request_output_len,
        "end_id": r.end_id,
        "pad_id": r.pad_id,
        "min_tokens": r.min_tokens,
        "repetition_penalty": r.repetition_penalty,
        "presence_penalty": r.presence_penalty,
        "frequency_penalty": r.frequency_penalty,
        "stop_token_ids": single_token_ids(r.stop_words_list) or None,
        "bad_token_ids": single_token_ids(r.bad_words_list) or None,
        # row sampling.logprobs_int; k > 1: the k most likely tokens too (row result.logprobs)
        "logprobs": max(1, r.options.top_logprobs) if r.return_log_probs else None,
        "detokenize": False,
        "n": r.options.num_return_sequences,  # row sampling.field.n (best_of follows: sampling.post_init)
    }
    if r.is_greedy:
        kwargs["top_k"] = 1
    else:
        kwargs.update(
            temperature=r.temperature,
            seed=r.seed,
            top_k=r.runtime_top_k if r.runtime_top_k > 0 else None,
            top_p=r.runtime_top_p if r.runtime_top_p > 0 else None,
            min_p=r.min_p or None,  # row sampling.field.min_p; None: the C++ runtime's default, 0 (off)
        )
    return kwargs


# Our guide types (TensorRT-LLM's C++ names) -> GuidedDecodingParams keywords (row
# sampling.guided_decoding.fields: json takes the schema, json_object any JSON).
GUIDE_KEYWORDS = {"json": "json_object", "json_schema": "json", "regex": "regex", "ebnf_grammar": "grammar"}


def guided_decoding_kwargs(r: EngineInputs) -> dict[str, Any] | None:
    """GuidedDecodingParams(**these) for one request, None without a guide."""
    kind = r.options.guided_decoding_guide_type
    if not kind:
        return None
    return {GUIDE_KEYWORDS[kind]: True if kind == "json" else r.options.guided_decoding_guide}


# Engine inputs of the sampling fields the table may mark ignored: (table field, input name, neutral).
_ENGINE_FIELDS = (
    ("repetition_penalty", "repetition_penalty", lambda r: r.repetition_penalty == 1.0),
    ("presence_penalty", "presence_penalty", lambda r: not r.presence_penalty),
    ("frequency_penalty", "frequency_penalty", lambda r: not r.frequency_penalty),
    ("bad_words", "bad_words_list", lambda r: not r.bad_words_list),
    ("min_p", "min_p", lambda r: not r.min_p),
)


def ignored_field_problems(r: EngineInputs, version: str, sampler: str | None = None) -> list[str]:
    """A non-neutral value of a field TensorRT-LLM `version`'s `sampler` (default: the default one) does not apply."""
    ignored = {row.field: row for row in sampling_support(version).ignored(EnginePath.PYTORCH, sampler)}
    return [
        f"'{name}': TensorRT-LLM {version}'s {ignored[field].sampler} does not apply it (row "
        f"{ignored[field].id} of contract/upstream/data/sampling_support_{version}.json); send the neutral value"
        for field, name, neutral in _ENGINE_FIELDS
        if field in ignored and not neutral(r)
    ]


def problems(r: EngineInputs, version: str | None = None, sampler: str | None = None) -> list[str]:
    """What this request asks that the LLM API cannot do (INVALID_ARG): with `version`, fields its
    sampler ignores; bad words of several tokens by id; several greedy samples (row
    sampling.validate.greedy_best_of: SamplingParams refuses them unless
    TLLM_ALLOW_N_GREEDY_DECODING is set, and n greedy copies say nothing)."""
    out = ignored_field_problems(r, version, sampler) if version else []
    longer = [list(w) for w in r.bad_words_list if len(w) > 1]
    if longer and not any(p.startswith("'bad_words_list'") for p in out):
        out.append(
            f"'bad_words_list': {len(longer)} bad word(s) of more than one token ({longer[:3]}); {LLM_API} "
            "takes bad words by id only one token each (SamplingParams.bad_token_ids): send words that are one token"
        )
    n = r.options.num_return_sequences
    if n > 1 and r.is_greedy:
        out.append(
            f"'num_return_sequences' {n} with greedy decoding: {LLM_API} refuses several greedy samples; "
            "sample (temperature > 0 with top_k > 1 or top_p > 0) or ask for one"
        )
    return out


def sampled_token_included(version: str, sampler: str, torch_row: dict) -> bool:
    """Whether each position's log-prob dict holds the sampled token: TorchSampler's as row
    result.logprobs.top_k says (1.2.x: no); a sampler limited to the sampled token's log prob
    (limit top_logprobs: TRTLLMSampler appends {sampled token: rank 1}) always."""
    info = sampling_support(version).samplers.get((EnginePath.PYTORCH, sampler))
    if info is not None and info.limit("top_logprobs") is not None:
        return True
    return bool(torch_row["sampled_token_included"])


def log_prob_problems(r: EngineInputs, sampled_token_included: bool, version: str) -> list[str]:
    """Row result.logprobs.top_k: where the LLM's per-token dict holds the top K only (1.2.x), a
    sampled token outside them has no log prob there, so log probs of sampled requests are
    refused rather than reported wrong (greedy picks the top one)."""
    if r.return_log_probs and not r.is_greedy and not sampled_token_included:
        return [
            f"'return_log_probs' with sampling: TensorRT-LLM {version}'s LLM API returns each position's "
            "top-k tokens' log probs, not the sampled token's (row result.logprobs.top_k); ask greedy "
            "(temperature 0) for log probs, or sample without them"
        ]
    return []


def multi_token_stops(r: EngineInputs) -> tuple[tuple[int, ...], ...]:
    """The stop sequences the engine watches itself (the LLM gets the single-token ones)."""
    return tuple(w for w in r.stop_words_list if len(w) > 1)
