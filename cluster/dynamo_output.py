"""The engine model's responses to one request -> the chunks a Dynamo worker yields to the
frontend (its LLMEngineOutput: `token_ids`, `index`, `log_probs`, `top_logprobs`, and on each
choice's last chunk `finish_reason`).  No `completion_usage`: the frontend counts the tokens it
was sent, and a worker's `prompt_tokens` would overwrite its count of the prompt - after a
migration with the prompt plus the tokens re-sent (docs/cluster.md, "Usage after a migration").

Where a sequence ends is the engine's decision, read as postprocessing reads it (contract/finish.py
tokens_end): an end id (the CPU engine keeps it in its output: it is passed on, and the frontend
hides it, counting it as generated as our server does), max_tokens reached, or the stream ending
(TensorRT-LLM leaves the end id out and ends the stream).  Tokens past a sequence's end are
dropped, so the frontend never sees more than max_tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from cluster.dynamo_request import EngineRequest
from contract.finish import FinishReason, tokens_end

TokenText = Callable[[int], str | None]  # a token id's text, for top_logprobs entries


@dataclass
class _Sequence:
    generated: int = 0
    finish: FinishReason = FinishReason.NONE


def _row(outputs: dict[str, np.ndarray], name: str) -> np.ndarray | None:
    """One response's [tokens, ...] of its one beam (outputs are [batch 1, beam 1, tokens, ...])."""
    value = outputs.get(name)
    if value is None or value.size == 0:
        return None
    return value.reshape((-1,) + value.shape[3:] if value.ndim > 3 else (-1,))


@dataclass
class ChunkMaker:
    request: EngineRequest
    token_text: TokenText = lambda _: None
    sequences: list[_Sequence] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sequences = [_Sequence() for _ in range(self.request.sequences)]

    @property
    def done(self) -> bool:
        return all(s.finish != FinishReason.NONE for s in self.sequences)

    @property
    def completion_tokens(self) -> int:
        return sum(s.generated for s in self.sequences)

    def chunks(self, outputs: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        """The chunks of one engine response (none once its sequence has ended)."""
        index = int(np.asarray(outputs.get("sequence_index", 0)).reshape(-1)[0])
        if not 0 <= index < len(self.sequences):
            raise ValueError(f"the engine answered sequence {index} of a request for {len(self.sequences)}")
        seq = self.sequences[index]
        ids_row = _row(outputs, "output_ids")
        if seq.finish != FinishReason.NONE or ids_row is None:
            return []
        length = outputs.get("sequence_length")
        ids = [int(t) for t in ids_row[: int(np.asarray(length).reshape(-1)[0]) if length is not None else None]]
        end = tokens_end(ids, self.request.end_ids, self.request.max_tokens - seq.generated)
        ids = ids[: end.counted]
        seq.generated += len(ids)
        seq.finish = end.finish
        chunk: dict[str, Any] = {"token_ids": ids, "index": index}
        log_probs = _row(outputs, "output_log_probs")
        if self.request.inputs.return_log_probs and log_probs is not None:
            chunk["log_probs"] = [float(x) for x in log_probs[: len(ids)]]
            chunk.update(self._alternatives(outputs, len(ids)))
        if end.finish != FinishReason.NONE:
            chunk["finish_reason"] = end.finish.value
        return [chunk]

    def _alternatives(self, outputs: dict[str, np.ndarray], n: int) -> dict[str, Any]:
        top_ids, top_lps = _row(outputs, "output_top_ids"), _row(outputs, "output_top_log_probs")
        if top_ids is None or top_lps is None:
            return {}
        return {
            "top_logprobs": [
                [
                    {"rank": rank + 1, "token_id": int(t), "token": self.token_text(int(t)), "logprob": float(lp)}
                    for rank, (t, lp) in enumerate(zip(top_ids[i], top_lps[i]))
                ]
                for i in range(n)
            ]
        }

    def closing(self) -> list[dict[str, Any]]:
        """After the engine's stream ended: each sequence still open ends with `stop` (TensorRT-LLM
        leaves the end id out of its output)."""
        out: list[dict[str, Any]] = []
        for index, seq in enumerate(self.sequences):
            if seq.finish == FinishReason.NONE:
                seq.finish = FinishReason.STOP
                out.append({"token_ids": [], "index": index, "finish_reason": FinishReason.STOP.value})
        return out
