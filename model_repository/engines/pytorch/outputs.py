"""What one streamed step of a RequestOutput holds for us: the new token ids and their log
probabilities (upstream rows result.fields, result.diffs, result.logprobs)."""

from __future__ import annotations

import json
from typing import Any, Sequence


def token_log_prob(entry: Any, token: int) -> float:
    """A log prob as the LLM API gives it: a float, or {token_id: Logprob(logprob, rank)} holding
    at least the sampled token.  0.0 where the sampled token is missing (never seen upstream)."""
    if isinstance(entry, dict):
        found = entry.get(token)
        return float(getattr(found, "logprob", found)) if found is not None else 0.0
    return float(entry)


def step_tokens(completion: Any) -> tuple[list[int], list[float]]:
    """(new ids, their log probs) of one step; log probs are 0.0 when none were asked for."""
    ids = [int(t) for t in completion.token_ids_diff]
    diff: Sequence[Any] = completion.logprobs_diff or ()
    if len(diff) < len(ids):
        return ids, [0.0] * len(ids)
    return ids, [token_log_prob(entry, t) for entry, t in zip(diff, ids)]


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
