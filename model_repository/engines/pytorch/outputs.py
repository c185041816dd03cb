"""What the LLM API's outputs hold for us: token ids with their log probabilities and
alternatives (upstream rows result.fields, result.logprobs), and the KV-cache usage of an
iteration stat.  Which tokens of a CompletionOutput are new is samples.py's job: its *_diff
properties are not read (they repeat with n > 1; see samples.py)."""

from __future__ import annotations

import json
from typing import Any, Sequence


def token_log_prob(entry: Any, token: int) -> float:
    """A log prob as the LLM API gives it: a float, or {token_id: Logprob(logprob, rank)} (row
    result.logprobs.top_k: at 1.2.x the top K, not always the chosen token).  A chosen token
    missing from it fails the request (ValueError) rather than reading as a made-up 0.0: where
    that can happen by design (sampling at 1.2.x) the engine model refuses log probs up front."""
    if isinstance(entry, dict):
        found = entry.get(token)
        if found is None:
            raise ValueError(
                f"the LLM returned no log prob for the chosen token {token} (its top "
                f"{len(entry)}: {sorted(entry)[:5]}; row result.logprobs.top_k)"
            )
        return _log_prob(found)
    return float(entry)


def _log_prob(value: Any) -> float:
    """A Logprob(logprob, rank)'s log prob, or the number itself."""
    return float(value.logprob if hasattr(value, "logprob") else value)


def alternatives(entry: Any, k: int) -> tuple[list[int], list[float]]:
    """The k most likely tokens of one position and their log probs, most likely first, from
    the LLM API's {token_id: Logprob(logprob, rank)} (row result.logprobs; SamplingParams.logprobs
    = k).  Raises ValueError when it holds fewer than k."""
    if not isinstance(entry, dict) or len(entry) < k:
        raise ValueError(
            f"the LLM returned {len(entry) if isinstance(entry, dict) else 0} alternatives for a "
            f"position; top_logprobs asked {k}"
        )
    ranked = sorted(entry.items(), key=lambda item: (-_log_prob(item[1]), item[0]))[:k]
    return [int(t) for t, _ in ranked], [_log_prob(lp) for _, lp in ranked]


def read_tokens(
    ids: Sequence[int], entries: Sequence[Any], k: int = 0
) -> tuple[list[int], list[float], list[tuple[list[int], list[float]]]]:
    """(ids, their log probs, their k alternatives) from the LLM's log prob entries of those
    ids; log probs are 0.0 when none were asked for (no entries), alternatives [] when k = 0."""
    ids = [int(t) for t in ids]
    if len(entries) < len(ids):
        return ids, [0.0] * len(ids), []
    tops = [alternatives(entry, k) for entry in entries] if k else []
    return ids, [token_log_prob(entry, t) for entry, t in zip(entries, ids)], tops


def kv_cache_usage(stat: Any) -> float | None:
    """usedNumBlocks / maxNumBlocks of one iteration stat (a JSON string or a dict; row
    stats.iteration_json), or None when it does not say."""
    if isinstance(stat, (str, bytes)):
        try:
            stat = json.loads(stat)
        except ValueError:
            return None
    kv = stat.get("kvCacheStats") if isinstance(stat, dict) else None
    if not isinstance(kv, dict) or not kv.get("maxNumBlocks"):
        return None
    return float(kv.get("usedNumBlocks", 0)) / float(kv["maxNumBlocks"])
