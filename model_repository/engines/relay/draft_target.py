"""tensorrt_llm_bls's draft-target speculative decoding (a request with num_draft_tokens > 0
on a deployment built with `--speculative-decoding draft_tokens_external`): the draft model
proposes tokens, the target verifies them in one step, until the answer is complete.

What NVIDIA's BLS does (NVIDIA/TensorRT-LLM triton_backend/all_models/inflight_batcher_llm/
tensorrt_llm_bls/1/lib/decode.py `_spec_generate` and triton_decoder.py
`_get_llm_tensors_from_request`, read at 4db68284ec55 and 07f3e442717f, versions not
identified; table row draft_target_bls_loop), and so this loop:
- each round sends the whole sequence so far (prompt + accepted tokens) as the prompt of
  both calls, non-streamed: the draft with request_output_len = min_tokens = the round's draft
  length, the target with draft_input_ids and request_output_len = the draft length + 1;
- the round's draft length is min(num_draft_tokens, tokens still allowed - 1);
- only one prompt, never streamed ("speculative decoding is not supported with batch size
  > 1", "streaming is not supported with speculative decoding": decode.py's texts);
- the answer goes out as one response when the loop ends.
Where this loop differs from NVIDIA's, on purpose:
- it ends as soon as the target returns fewer tokens than asked (it reached the end id, a stop
  word or max_seq_len), where NVIDIA's runs one more round to see nothing change;
- a stop word is looked for only in the generated tokens (NVIDIA's looks at the prompt too);
- the client's min_tokens holds for the target (NVIDIA's drops it after the first draft);
- log probs and the draft counts cover the whole answer, not the last round's; the counts
  (total_draft_tokens, total_accepted_draft_tokens, acceptance_rate =
  accepted / drafted, as the executor's perf metrics define them) are computed here from
  the tokens: the accepted drafts of a round are exactly the draft's longest prefix that
  the target's output repeats (the first token after it is the target's own, differing).

Nothing here imports Triton: `call(model, arrays)` is the adapter's (bls_calls.py).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from model_repository.engine_step.word_lists import from_word_list
from model_repository.engines.relay.bls_pipeline import first_value

# decode.py Request.validate / Decoder.decode (upstream's texts).
STREAMING_REFUSAL = "streaming is not supported with speculative decoding"
BATCH_REFUSAL = "speculative decoding is not supported with batch size > 1"

Call = Callable[[str, dict[str, np.ndarray]], Mapping[str, np.ndarray]]


class LoopCancelled(Exception):
    pass


def num_draft_tokens(request: Mapping[str, np.ndarray]) -> int:
    """The client's num_draft_tokens (0: plain decoding, as upstream's `> 0` test)."""
    return int(first_value(request, "num_draft_tokens", 0) or 0)


def refusal(request: Mapping[str, np.ndarray], engine: Mapping[str, np.ndarray], max_draft_len: int) -> str | None:
    """Why this request cannot take the draft loop (INVALID_ARG), or None.  `request`: the
    client's inputs; `engine`: the engine request preprocessing made of them."""
    drafts = num_draft_tokens(request)
    if drafts < 0:
        return f"'num_draft_tokens' must be >= 0, got {drafts}"
    if drafts > max_draft_len:
        return (
            f"'num_draft_tokens' {drafts} exceeds the target engine's max_draft_len {max_draft_len} "
            "(build it with a larger --max-draft-len)"
        )
    if bool(first_value(engine, "streaming", False)):
        return STREAMING_REFUSAL
    if len(engine["input_ids"]) > 1:
        return BATCH_REFUSAL
    if int(first_value(engine, "num_return_sequences", 1) or 1) > 1:
        return (
            "'num_return_sequences' > 1 is not supported with speculative decoding (the draft loop follows one answer)"
        )
    if first_value(engine, "guided_decoding_guide_type"):
        return (
            "'guided_decoding_guide_type' is not supported with speculative decoding (the draft engine runs unguided)"
        )
    return None


@dataclass
class LoopResult:
    tokens: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    drafted: int = 0
    accepted: int = 0
    rounds: int = 0


def _ends_with_stop_word(generated: Sequence[int], words: Sequence[Sequence[int]]) -> bool:
    return any(word and len(word) <= len(generated) and list(generated[-len(word) :]) == list(word) for word in words)


def _tokens(response: Mapping[str, np.ndarray]) -> list[int]:
    ids = np.asarray(response["output_ids"]).reshape(-1)
    count = int(np.asarray(response["sequence_length"]).reshape(-1)[0])
    return [int(t) for t in ids[:count]]


class DraftLoop:
    """One request's rounds.  `run` on a worker thread; `cancel` from any thread ends the
    loop before its next call and cancels the call in flight (`cancel_call`)."""

    def __init__(
        self,
        engine: Mapping[str, np.ndarray],
        drafts: int,
        call: Call,
        draft_model: str,
        target_model: str,
        cancel_call: Callable[[], None] = lambda: None,
    ) -> None:
        self._engine = {k: v for k, v in engine.items() if k != "return_perf_metrics"}  # the counts are ours
        self._drafts = drafts
        words = engine.get("stop_words_list")
        self._stop_words = from_word_list(words) if words is not None and np.asarray(words).size else []
        self._call = call
        self._models = draft_model, target_model
        self._cancel_call = cancel_call
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()
        self._cancel_call()

    def _arrays(
        self, sequence: list[int], output_len: int, min_tokens: int, draft: Sequence[int] | None
    ) -> dict[str, np.ndarray]:
        arrays = dict(self._engine)
        arrays.update(
            input_ids=np.asarray([sequence], np.int32),
            input_lengths=np.array([[len(sequence)]], np.int32),
            request_output_len=np.array([[output_len]], np.int32),
            min_tokens=np.array([[min_tokens]], np.int32),
            streaming=np.array([[False]]),
            exclude_input_in_output=np.array([[True]]),
        )
        if draft:
            arrays["draft_input_ids"] = np.asarray([list(draft)], np.int32)
        return arrays

    def _send(self, model: str, arrays: dict[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        if self._cancelled.is_set():
            raise LoopCancelled()
        return self._call(model, arrays)

    def run(self) -> LoopResult:
        prompt = [int(t) for t in np.asarray(self._engine["input_ids"]).reshape(-1)]
        max_new = int(first_value(self._engine, "request_output_len"))
        min_new = int(first_value(self._engine, "min_tokens", 0) or 0)
        wants_log_probs = bool(first_value(self._engine, "return_log_probs", False))
        draft_model, target_model = self._models
        out = LoopResult()
        while len(out.tokens) < max_new:
            out.rounds += 1
            sequence = prompt + out.tokens
            length = min(self._drafts, max_new - len(out.tokens) - 1)
            draft: list[int] = []
            if length > 0:
                draft = _tokens(self._send(draft_model, self._arrays(sequence, length, length, None)))[:length]
            asked = len(draft) + 1
            verified = self._send(
                target_model, self._arrays(sequence, asked, min(asked, max(0, min_new - len(out.tokens))), draft)
            )
            new = _tokens(verified)
            out.drafted += len(draft)
            out.accepted += len(os.path.commonprefix([draft, new]))  # works on lists
            out.tokens += new
            if wants_log_probs and "output_log_probs" in verified:
                out.log_probs += [float(v) for v in np.asarray(verified["output_log_probs"]).reshape(-1)[: len(new)]]
            if len(new) < asked or _ends_with_stop_word(out.tokens, self._stop_words):
                break
        return out


def response_arrays(result: LoopResult, engine: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The loop's answer as one engine response (TensorRT-LLM's shapes: output_ids [1, 1, n],
    sequence_length [1, 1]); log probs when asked, the draft counts with return_perf_metrics."""
    n = len(result.tokens)
    out: dict[str, np.ndarray] = {
        "output_ids": np.asarray(result.tokens, np.int32).reshape(1, 1, n),
        "sequence_length": np.array([[n]], np.int32),
    }
    if bool(first_value(engine, "return_log_probs", False)):
        out["output_log_probs"] = np.asarray(result.log_probs, np.float32).reshape(1, 1, -1)
        out["cum_log_probs"] = np.array([[sum(result.log_probs)]], np.float32)
    if bool(first_value(engine, "return_perf_metrics", False)):
        out["total_draft_tokens"] = np.array([[result.drafted]], np.int32)
        out["total_accepted_draft_tokens"] = np.array([[result.accepted]], np.int32)
        out["acceptance_rate"] = np.array([[result.accepted / result.drafted if result.drafted else 0.0]], np.float32)
    return out
