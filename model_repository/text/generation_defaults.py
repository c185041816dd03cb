"""Generation defaults of a checkpoint: every EOS id, the pad and BOS ids and the vocabulary
size, from its generation_config.json (falling back to config.json).  Its sampling settings
are not read: NVIDIA's ensemble contract is greedy unless the request asks to sample
(model_repository/text/preprocessor.py, resolve_sampling)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GenerationDefaults:
    eos_ids: tuple[int, ...]  # all of them, e.g. Llama-3's <|eot_id|> and <|end_of_text|>
    pad_id: int
    bos_id: int | None
    vocab_size: int

    @classmethod
    def from_checkpoint(cls, directory: Path) -> "GenerationDefaults":
        config = _read_json(directory / "config.json")
        gen = _read_json(directory / "generation_config.json")
        eos = _ids(gen.get("eos_token_id", config.get("eos_token_id")))
        if not eos:
            raise ValueError(f"{directory}: neither generation_config.json nor config.json names an eos_token_id")
        pad = _ids(gen.get("pad_token_id", config.get("pad_token_id")))
        bos = _ids(gen.get("bos_token_id", config.get("bos_token_id")))
        if "vocab_size" not in config:
            raise ValueError(f"{directory}/config.json has no vocab_size")
        return cls(
            eos_ids=tuple(eos),
            pad_id=pad[0] if pad else eos[0],
            bos_id=bos[0] if bos else None,
            vocab_size=int(config["vocab_size"]),
        )


def _read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _ids(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]
