"""Rebuild a Hugging Face `tokenizers` tokenizer from the metadata of a GGUF file.

transformers 5.5 (the version optimum-intel pins) turns GPT-2 style GGUF vocabularies into
a broken SentencePiece tokenizer (every space becomes `<|endoftext|>`), so we build the
tokenizer ourselves from the GGUF fields, following llama.cpp's meaning of them
(`tokenizer.ggml.model`, `.pre`, `.tokens`, `.token_type`, `.merges`, special ids).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers


class TokenType(enum.IntEnum):
    """llama.cpp's `tokenizer.ggml.token_type` values."""

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


# llama.cpp pre-tokenizer names -> HF pre-tokenizers (see llama-vocab.cpp regex_exprs).
_LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _pre_tokenizer(pre: str) -> Any:
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre in ("smollm", "starcoder", "refact", "codeshell"):
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    if pre in ("gpt2", "default", "gpt-2"):
        return byte_level
    if pre in ("llama3", "llama-v3", "llama-bpe"):
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(_LLAMA3_REGEX), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
            ]
        )
    raise ValueError(
        f"GGUF tokenizer.ggml.pre={pre!r} is not supported; supported: smollm, starcoder, refact, "
        "codeshell, gpt2, default, llama3, llama-bpe. Convert the checkpoint with its original "
        "tokenizer.json instead."
    )


@dataclass(frozen=True)
class GgufTokenizerSpec:
    model: str  # tokenizer.ggml.model
    pre: str  # tokenizer.ggml.pre
    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    chat_template: str | None

    def token(self, token_id: int | None) -> str | None:
        return None if token_id is None else self.tokens[token_id]


def read_gguf_tokenizer(path: Path) -> GgufTokenizerSpec:
    import gguf  # heavy; only the build needs it

    reader = gguf.GGUFReader(str(path))

    def field(key: str, default: Any = None) -> Any:
        f = reader.fields.get(key)
        return default if f is None else f.contents()

    tokens = field("tokenizer.ggml.tokens")
    if tokens is None:
        raise ValueError(f"{path}: no tokenizer.ggml.tokens; the GGUF file carries no tokenizer")
    return GgufTokenizerSpec(
        model=field("tokenizer.ggml.model", ""),
        pre=field("tokenizer.ggml.pre", "default"),
        tokens=list(tokens),
        token_types=list(field("tokenizer.ggml.token_type", [TokenType.NORMAL] * len(tokens))),
        merges=list(field("tokenizer.ggml.merges", [])),
        bos_id=field("tokenizer.ggml.bos_token_id"),
        eos_id=field("tokenizer.ggml.eos_token_id"),
        unk_id=field("tokenizer.ggml.unknown_token_id"),
        pad_id=field("tokenizer.ggml.padding_token_id"),
        chat_template=field("tokenizer.chat_template"),
    )


def build_tokenizer(spec: GgufTokenizerSpec) -> Tokenizer:
    """A byte-level BPE `tokenizers.Tokenizer` equivalent to the GGUF vocabulary."""
    if spec.model != "gpt2":
        raise ValueError(f"GGUF tokenizer.ggml.model={spec.model!r} is not supported (only byte-level BPE, 'gpt2')")
    vocab = {tok: i for i, tok in enumerate(spec.tokens)}
    merges = [tuple(m.split(" ", 1)) for m in spec.merges]
    tokenizer = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False, ignore_merges=False)
    )
    tokenizer.pre_tokenizer = _pre_tokenizer(spec.pre)
    tokenizer.decoder = decoders.ByteLevel()
    added = [
        AddedToken(spec.tokens[i], special=(t == TokenType.CONTROL), normalized=False)
        for i, t in enumerate(spec.token_types)
        if t in (TokenType.CONTROL, TokenType.USER_DEFINED)
    ]
    tokenizer.add_tokens(added)
    return tokenizer


def save_hf_tokenizer(spec: GgufTokenizerSpec, out_dir: Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and chat_template.jinja for transformers."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(
        tokenizer_object=build_tokenizer(spec),
        bos_token=spec.token(spec.bos_id),
        eos_token=spec.token(spec.eos_id),
        unk_token=spec.token(spec.unk_id),
        pad_token=spec.token(spec.pad_id),
        clean_up_tokenization_spaces=False,
        model_max_length=None,
    )
    if spec.chat_template:
        hf.chat_template = spec.chat_template
    hf.save_pretrained(str(out_dir))
