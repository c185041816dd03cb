"""What postprocessing must know about a request, sent by preprocessing as one JSON tensor
(routed around the engine by the ensemble)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PostprocessParams:
    stream_id: str  # unique per request: keys the incremental detokenizer's state
    max_tokens: int
    end_ids: tuple[int, ...]
    num_input_tokens: int
    streaming: bool
    stop_strings: tuple[str, ...] = ()
    skip_special_tokens: bool = True
    echo_text: str = ""  # the prompt, when exclude_input_in_output is false

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> "PostprocessParams":
        data = json.loads(text)
        data["end_ids"] = tuple(data["end_ids"])
        data["stop_strings"] = tuple(data.get("stop_strings", ()))
        return cls(**data)
