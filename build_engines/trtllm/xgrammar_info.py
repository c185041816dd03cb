"""The tokenizer description TensorRT-LLM's xgrammar guided decoder loads from the
`tensorrt_llm` model's `xgrammar_tokenizer_info_path`.

Upstream reads three keys from that JSON file when the model instance is created (row
guided.tokenizer_info of contract/upstream/data/trtllm_backend_semantics_<version>.json):
`encoded_vocab` (every token's string, in id order), `tokenizer_str` (the fast tokenizer's
serialization) and `stop_token_ids`.  Upstream makes the file with
examples/generate_xgrammar_tokenizer_info.py (NVIDIA/TensorRT-LLM, read at 7ed07f06), which
dumps tensorrt_llm/llmapi/tokenizer.py `_xgrammar_tokenizer_info` (read through the index,
version not identified): the vocab sorted by id, `backend_tokenizer.to_str()` for a fast
tokenizer, and `[eos_token_id]`; tensorrtllm_backend docs/guided_decoding.md (read at
395c4035) then fills `guided_decoding_backend:xgrammar` and `xgrammar_tokenizer_info_path`.
None of it is confirmed at the pinned tags.  We do the same here (the GPU image is not needed
to render a repository) with two checks upstream lacks: the ids must run 0..n-1 (sorting a
vocabulary with holes misplaces every later token), and every EOS id of the checkpoint's
generation_config is a stop token too (the model may end with any of them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INFO_FILE = "xgrammar_tokenizer_info.json"


class TokenizerInfoError(ValueError):
    pass


def tokenizer_info(tokenizer: Any, eos_ids: tuple[int, ...] = ()) -> dict[str, Any]:
    """encoded_vocab / tokenizer_str / stop_token_ids for a Hugging Face fast tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TokenizerInfoError(
            "'tokenizer_dir': guided decoding needs a fast tokenizer (tokenizer.json); "
            "this one has no backend_tokenizer"
        )
    by_id = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    holes = [i for i, (_, token_id) in enumerate(by_id) if token_id != i]
    if holes:
        raise TokenizerInfoError(
            f"'tokenizer_dir': token ids are not contiguous (no token {holes[0]}); "
            f"encoded_vocab would misplace every token after it"
        )
    stops = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    stops += [i for i in eos_ids if i not in stops]
    if not stops:
        raise TokenizerInfoError("'tokenizer_dir': the tokenizer has no EOS token and the checkpoint names none")
    return {"encoded_vocab": [token for token, _ in by_id], "tokenizer_str": backend.to_str(), "stop_token_ids": stops}


def write_tokenizer_info(tokenizer_dir: Path, path: Path) -> Path:
    """Write the file for the tokenizer in `tokenizer_dir` (unchanged files are left alone)."""
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise TokenizerInfoError(
            f"'guided_decoding_backend': the xgrammar tokenizer info needs a fast tokenizer; "
            f"{tokenizer_dir} has no tokenizer.json (or render with --guided-decoding none)"
        )
    from transformers import AutoTokenizer

    from model_repository.text.generation_defaults import GenerationDefaults

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    text = json.dumps(tokenizer_info(tokenizer, GenerationDefaults.from_checkpoint(tokenizer_dir).eos_ids))
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path
