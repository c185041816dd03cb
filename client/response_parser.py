"""One streamed ensemble response -> StreamChunk."""

from __future__ import annotations

import math

from client.types import Alternatives, PromptLogprobs, StreamChunk


def is_final(result) -> bool:
    params = result.get_response().parameters
    return "triton_final_response" in params and params["triton_final_response"].bool_param


def _text(result, name: str) -> str:
    array = result.as_numpy(name)
    if array is None or array.size == 0:
        return ""
    return b"".join(x if isinstance(x, bytes) else str(x).encode() for x in array.reshape(-1)).decode("utf-8")


def _int(result, name: str) -> int:
    array = result.as_numpy(name)
    return int(array.reshape(-1)[0]) if array is not None and array.size else 0


def _alternatives(result) -> tuple[Alternatives, ...]:
    """output_top_ids / output_top_log_probs ([1, beam, tokens, k]) per token; () when absent."""
    ids, lps = result.as_numpy("output_top_ids"), result.as_numpy("output_top_log_probs")
    if ids is None or lps is None or ids.size == 0:
        return ()
    k = ids.shape[-1]
    return tuple(
        tuple((int(t), float(lp)) for t, lp in zip(row_ids, row_lps))
        for row_ids, row_lps in zip(ids.reshape(-1, k), lps.reshape(-1, k))
    )


def _prompt_logprobs(result) -> PromptLogprobs | None:
    """prompt_ids / prompt_log_probs ([1, tokens]) and prompt_top_* ([1, tokens, k]); None when absent."""
    ids, lps = result.as_numpy("prompt_ids"), result.as_numpy("prompt_log_probs")
    if ids is None or lps is None:
        return None
    top_ids, top_lps = result.as_numpy("prompt_top_ids"), result.as_numpy("prompt_top_log_probs")
    k = top_ids.shape[-1] if top_ids is not None else 0
    tops: tuple[Alternatives, ...] = ()
    if top_ids is not None and top_lps is not None:
        tops = tuple(
            tuple((int(t), float(lp)) for t, lp in zip(row_ids, row_lps) if t >= 0)
            for row_ids, row_lps in zip(top_ids.reshape(-1, k), top_lps.reshape(-1, k))
        )
    return PromptLogprobs(
        tuple(int(t) for t in ids.reshape(-1)),
        tuple(None if math.isnan(float(x)) else float(x) for x in lps.reshape(-1)),
        tops,
    )


def parse_chunk(result, arrived_s: float) -> StreamChunk | None:
    """None for an empty (flags-only) final response."""
    if result.as_numpy("text_output") is None:
        return None
    log_probs = result.as_numpy("output_log_probs")
    ids = result.as_numpy("output_ids")
    return StreamChunk(
        text=_text(result, "text_output"),
        finish_reason=_text(result, "finish_reason"),
        num_input_tokens=_int(result, "num_input_tokens"),
        num_output_tokens=_int(result, "num_output_tokens"),
        token_ids=tuple(int(x) for x in ids.reshape(-1)) if ids is not None else (),
        log_probs=tuple(float(x) for x in log_probs.reshape(-1)) if log_probs is not None else (),
        top_logprobs=_alternatives(result),
        arrived_s=arrived_s,
        sequence_index=_int(result, "sequence_index"),
        prompt_logprobs=_prompt_logprobs(result),
    )
