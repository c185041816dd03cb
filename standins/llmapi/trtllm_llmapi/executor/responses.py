"""What the executor hands the LLM API for one request (stand-in): one response per sequence,
built as TensorRT-LLM's batch manager builds them.  The generators (cpu_engine.py,
toy_model.py) say what each sequence produced; this module decides what each response
carries and when, from upstream's source:

- LLM_REQUEST = NVIDIA/TensorRT-LLM cpp/tensorrt_llm/batch_manager/llmRequest.cpp, read at
  stored commit 119c6e60e65e5ecec4e97afdb6ea584f674aed24 (not the v1.2.1 tag, whose commit
  the index does not hold; triton-inference-server/TensorRT-LLM ca88df0 is too large to
  fetch here): LlmRequest::createResult (lines 69-226 of that version, counted in its stored
  text), LlmRequest::createResponse (43-52: a child answers with its parent's request id) and
  LlmRequest::createChildRequest (317-346).  The PyTorch backend's LlmRequest derives
  from these C++ bindings (tensorrt_llm/_torch/pyexecutor/llm_request.py).
- SAMPLING_PARAMS = NVIDIA/TensorRT-LLM tensorrt_llm/sampling_params.py at a98a9061 (the
  commit contract/upstream/data/llmapi_1.2.1.json names): SamplingParams._get_sampling_config
  (lines not counted: only the second half of that file was read here).
- PR_8785 = NVIDIA/TensorRT-LLM#8785 "Return logprobs incrementally in torch backend" (merged to
  main 2025-11, during the 1.2.0rc series - 1.2.0rc2 was released from main on 2025-11-07,
  tensorrtllm_backend#819 - and before main moved on to 1.3.0rc (1.3.0rc1 was out by 2026-01-30,
  ai-dynamo/dynamo#5807): taken to be in 1.2.1 and in 1.3.0rc29; not confirmed at either tag): in streaming without beam search the PyTorch
  backend sends only the log probs new in each response, and result.py appends them as they are
  (its diff of _handle_sequence: `output.logprobs += response_tensors.log_probs[src_idx]`, where
  it sliced a growing list before).  INCREMENTAL_LOG_PROBS says which the stand-in reproduces.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Optional


# True: PR_8785's behaviour (1.2.1, 1.3.0rc29); False: every response holds every log prob so far (before it)
INCREMENTAL_LOG_PROBS = True


class FinishReason(enum.Enum):
    """tensorrt_llm.bindings.executor.FinishReason (the values result.py tests for)."""

    NOT_FINISHED = 0
    END_ID = 1
    STOP_WORDS = 2
    LENGTH = 3
    TIMED_OUT = 4
    CANCELLED = 5


@dataclass(frozen=True)
class Result:
    """executor::Result as createResult fills it, outside beam search (one beam)."""

    sequence_index: int  # createResult 83: result.sequenceIndex = mSequenceIndex
    output_token_ids: list[list[int]]  # [beam][tokens]: the tokens not sent before (streaming)
    finish_reasons: list[FinishReason]  # [beam]
    is_sequence_final: bool  # this sequence finished
    is_final: bool  # every sequence of the request finished (createResult 85-89: mSequenceFinalVec, all_of)
    cum_log_probs: Optional[list[float]] = None  # [beam], only with log probs asked
    # [beam][the tokens' log probs], only with log probs asked: this response's new ones (PR_8785), or every one so far
    log_probs: Optional[list[list[Any]]] = None
    decoding_iter: int = 0


@dataclass(frozen=True)
class Response:
    """executor::Response: a result, or an error for the whole request."""

    request_id: int
    result: Optional[Result] = None
    error_msg: str = ""

    def has_error(self) -> bool:
        return bool(self.error_msg)


def sequence_count(params) -> int:
    """How many sequences the executor runs for one LLM-API request: outside beam search
    num_return_sequences = best_of (SAMPLING_PARAMS _get_sampling_config; its comment
    table says `n`, the code sets best_of), so the LLM API can keep the best n."""
    return params.best_of or params.n


def sequence_seed(params, index: int) -> Optional[int]:
    """Sequence `index`'s random seed.  The parent request is sequence 0 and keeps the seed;
    each child request adds its sequence index to it, and without a seed the parent's
    defaults to 0 (LLM_REQUEST 329-342, createChildRequest: randomSeed += mSequenceIndex;
    defaultSeed{0}); children get sequence indices 1.. in creation order (324).  With one
    sequence there is no child: the seed as given."""
    if sequence_count(params) == 1:
        return params.seed
    return (params.seed or 0) + index


@dataclass
class _Sequence:
    tokens: list[int] = field(default_factory=list)
    log_probs: list[Any] = field(default_factory=list)
    cum_log_prob: float = 0.0
    sent: int = 0  # getMaxSentTokenLen, counted from the first generated token
    reason: FinishReason = FinishReason.NOT_FINISHED
    iterations: int = 0


class RequestResults:
    """One request's sequences, and the response createResult makes for each."""

    def __init__(self, request_id: int, params, streaming: bool) -> None:
        self.request_id = request_id
        self._streaming = streaming
        self._log_probs = bool(params.logprobs)  # OutputConfig.return_log_probs (PyTorch backend: bool(logprobs))
        self._sequences = [_Sequence() for _ in range(sequence_count(params))]

    @property
    def finished(self) -> bool:
        return all(s.reason is not FinishReason.NOT_FINISHED for s in self._sequences)

    def unfinished(self) -> list[int]:
        return [i for i, s in enumerate(self._sequences) if s.reason is FinishReason.NOT_FINISHED]

    def advance(self, index: int, tokens: list[int], log_probs: list[Any], cum_log_prob: float,
                reason: FinishReason = FinishReason.NOT_FINISHED) -> Optional[Response]:
        """Sequence `index` produced `tokens` (and their log prob entries) this iteration and
        perhaps finished; the response it sends now, or None (createResult's nullopt)."""
        seq = self._sequences[index]
        if seq.reason is not FinishReason.NOT_FINISHED:
            return None  # a finished sequence makes no more responses
        seq.tokens.extend(tokens)
        seq.log_probs.extend(log_probs)
        seq.cum_log_prob = cum_log_prob
        seq.reason = reason
        seq.iterations += 1
        finished = reason is not FinishReason.NOT_FINISHED
        # createResult 72-78, 130-135: nothing before the sequence finished unless streaming;
        # streaming sends only when there are tokens not sent yet, a finished one always
        if not (finished or (self._streaming and len(seq.tokens) > seq.sent)):
            return None
        start = seq.sent if self._streaming else 0  # 113-120 calculateNbTokensOut: not streaming = every token
        seq.sent = len(seq.tokens)  # 223-224 setMaxSentTokenLen
        result = Result(sequence_index=index, output_token_ids=[seq.tokens[start:]], finish_reasons=[seq.reason],
                        is_sequence_final=finished, is_final=self.finished, decoding_iter=seq.iterations,
                        # 152-156 returnLogProbs: cumLogProbs and the logProbs (PR_8785: only the new ones)
                        cum_log_probs=[seq.cum_log_prob] if self._log_probs else None,
                        log_probs=[self._log_prob_slice(seq, start)] if self._log_probs else None)
        return Response(self.request_id, result)

    @staticmethod
    def _log_prob_slice(seq: "_Sequence", start: int) -> list[Any]:
        return list(seq.log_probs[start:]) if INCREMENTAL_LOG_PROBS else list(seq.log_probs)

