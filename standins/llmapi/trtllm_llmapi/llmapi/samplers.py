"""The two samplers of the PyTorch backend at 1.2.1, as the stand-in's generators apply them.

Read in contract/upstream/data/sampling_support_1.2.1.json (each row cites upstream):

- TorchSampler (rows pytorch.*; sampler.py at 00026bd1): _process_requests applies only the
  embedding bias and the min-length penalty before sampling by temperature / top-k / top-p;
  repetition/presence/frequency penalties and bad words are accepted and silently not applied,
  and every request draws from one torch.Generator seeded with _global_seed = 42
  (get_generator): a request's own seed changes nothing.  min_p reaches its SamplingConfig and
  is not read either (row pytorch.min_p; PR #16590 adds it after 1.2.1).  Log probs: the top K of
  log_softmax before temperature (row result.logprobs.top_k in llmapi_1.2.1.json).
- TRTLLMSampler (rows pytorch.trtllm_sampler.*, sampler.TRTLLMSampler): the executor's C++
  decoder: the penalties (PenaltyLayer), bad words (BanWordsLayer) and each request's own seed
  (its curand state) are applied; its log probs are the sampled token's only, rank 1
  (update_requests_single_beam_single_step), whatever SamplingParams.logprobs asks.  What it does
  with min_p was not read (row pytorch.trtllm_sampler.min_p, not_read): the stand-in refuses it
  there (unread_fields) rather than guess.

The penalty arithmetic is the C++ kernel's as far as it was read (PR #8127's review of
penaltyKernels.cu batchApplyPenalty): logits scaled by 1/temperature first, then for each token
seen in the prompt or the output the repetition penalty (a positive logit divided by it, a
negative one multiplied), the presence penalty once and the frequency penalty per occurrence
subtracted.  The kernel's order and whether presence/frequency count the prompt (its
prompt_ignore_length default) are not confirmed at the tag: the stand-in counts the whole sequence.
"""

from __future__ import annotations

import math
from collections import Counter

from .._upstream import StandinLimitation

TORCH = "TorchSampler"
TRTLLM = "TRTLLMSampler"
SAMPLER_TYPES = ("auto", TORCH, TRTLLM)  # TorchLlmArgs.sampler_type
TORCH_GLOBAL_SEED = 42  # TorchSampler.get_generator: _global_seed


def resolve(sampler_type) -> str:
    """instantiate_sampler (row sampler.TorchSampler): auto is TorchSampler without beam search
    (the stand-in has none); TRTLLMSampler only when asked for by name."""
    value = getattr(sampler_type, "value", sampler_type)
    if value not in SAMPLER_TYPES:
        raise ValueError(f"sampler_type: Input should be 'TRTLLMSampler', 'TorchSampler' or 'auto' (got {value!r})")
    return TORCH if value == "auto" else value


def applies_request_fields(sampler: str) -> bool:
    """Whether the penalties, bad words and the request's own seed reach the sampling: TRTLLMSampler's."""
    return sampler == TRTLLM


def unread_fields(params, sampler: str) -> list[str]:
    """SamplingParams fields set to something whose effect under `sampler` was not read upstream
    (rows with support not_read): the stand-in cannot say what they do.  TorchSampler ignores min_p."""
    return ["min_p"] if sampler == TRTLLM and params.min_p else []


def bad_token_ids(params, sampler: str) -> tuple[int, ...]:
    """The single-token bad words the sampler masks: none for TorchSampler (it ignores them)."""
    if sampler != TRTLLM:
        return ()
    if params.bad:
        raise StandinLimitation("SamplingParams.bad (strings need a tokenizer; bad_token_ids work)")
    return tuple(params.bad_token_ids or ())


def penalized(logits: list[float], params, seen: list[int], sampler: str) -> list[float]:
    """The logits the sampler samples from: TRTLLMSampler's 1/temperature, penalties and bad words
    applied; TorchSampler's as they are (it scales by temperature itself when it samples)."""
    if sampler != TRTLLM:
        return logits
    t = params.temperature if params.temperature not in (None, 0) and not params.is_greedy else 1.0
    out = [x / t for x in logits]
    rep = params.repetition_penalty if params.repetition_penalty is not None else 1.0
    presence, frequency = params.presence_penalty or 0.0, params.frequency_penalty or 0.0
    for token, count in Counter(seen).items():
        x = out[token]
        if rep != 1.0:
            x = x / rep if x > 0 else x * rep
        out[token] = x - presence - frequency * count
    for token in bad_token_ids(params, sampler):
        out[token] = -math.inf
    return out


def log_softmax(logits: list[float]) -> list[float]:
    finite = [x for x in logits if x != -math.inf]
    top = max(finite)
    norm = top + math.log(sum(math.exp(x - top) for x in finite))
    return [x - norm if x != -math.inf else -math.inf for x in logits]
