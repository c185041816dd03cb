"""Incremental detokenization: token ids in, text deltas out, byte-exact with decoding the
whole output at once, O(1) amortized per token.

The concatenation of every `push()` result and the final `flush()` equals
`tokenizer.decode(all_ids, skip_special_tokens=...)`.  Two strategies:

* `ByteTableDetokenizer` - for decoders that are a per-token byte mapping (byte-level BPE:
  GPT-2, Llama-3, SmolLM; SentencePiece with byte fallback: Llama-2, Mistral).  Each token's
  raw bytes are looked up once and fed to an incremental UTF-8 decoder, which holds back a
  multi-byte character until it is complete, and emits U+FFFD exactly where decoding the
  whole byte string would.
* `WindowDetokenizer` - for any other decoder: re-decodes a short window of recent tokens
  (a prefix for context plus the unread tokens) and emits the new suffix.

transformers' `clean_up_tokenization_spaces` (" ," -> ",", " 's" -> "'s", ...) is never
applied: it edits what the model wrote (code above all), and no streaming server applies it.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass
from typing import Protocol, Sequence

from tokenizers import Tokenizer


class Detokenizer(Protocol):
    def push(self, ids: Sequence[int]) -> str: ...

    def flush(self) -> str: ...


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte <-> printable-character map used by ByteLevel."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


_CHAR_TO_BYTE = {c: b for b, c in _bytes_to_unicode().items()}
_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@dataclass(frozen=True)
class TokenTable:
    token_bytes: tuple[bytes, ...]  # indexed by id
    special_ids: frozenset[int]  # dropped when skip_special_tokens
    strip_leading_space: bool  # SentencePiece: the decoded text loses one leading space
    # SentencePiece byte-fallback tokens (<0xAB>).  Their decoder turns a run of them into
    # text if the run is valid UTF-8, else into one U+FFFD per byte, so a run is held
    # until it ends.  Empty for byte-level BPE, whose decoder is plain lossy UTF-8.
    byte_fallback_ids: frozenset[int] = frozenset()


def _decoder_kind(decoder: dict | None) -> tuple[str, bool] | None:
    """('bytelevel'|'sentencepiece', strip_leading_space), or None if not table-decodable."""
    if decoder is None:
        return None
    if decoder["type"] == "ByteLevel":
        return ("bytelevel", False)
    if decoder["type"] == "Sequence":
        parts = decoder["decoders"]
        kinds = [d["type"] for d in parts]
        replace_ok = all(
            d["type"] != "Replace" or (d["pattern"].get("String") == "▁" and d["content"] == " ") for d in parts
        )
        if kinds in (["Replace", "ByteFallback", "Fuse", "Strip"], ["Replace", "ByteFallback", "Fuse"]) and replace_ok:
            strip = parts[-1] if kinds[-1] == "Strip" else None
            if strip is not None and not (strip["content"] == " " and strip["start"] == 1 and strip["stop"] == 0):
                return None
            return ("sentencepiece", strip is not None)
    return None


def build_token_table(tokenizer: Tokenizer) -> TokenTable | None:
    kind = _decoder_kind(json.loads(tokenizer.to_str()).get("decoder"))
    if kind is None:
        return None
    style, strip = kind
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    added = tokenizer.get_added_tokens_decoder()
    table: list[bytes] = []
    fallback: set[int] = set()
    for i in range(vocab_size):
        token = tokenizer.id_to_token(i)
        if token is None:
            table.append(b"")
            continue
        if style == "bytelevel":
            if all(c in _CHAR_TO_BYTE for c in token):
                table.append(bytes(_CHAR_TO_BYTE[c] for c in token))
            else:  # the ByteLevel decoder passes tokens it cannot map through as UTF-8
                table.append(token.encode("utf-8"))
        else:
            m = _BYTE_FALLBACK.match(token)
            if m and i not in added:
                fallback.add(i)
                table.append(bytes([int(m.group(1), 16)]))
            else:
                table.append(token.replace("▁", " ").encode("utf-8"))
    special = frozenset(i for i, t in added.items() if t.special)
    return TokenTable(tuple(table), special, strip, frozenset(fallback))


class ByteTableDetokenizer:
    def __init__(self, table: TokenTable, skip_special_tokens: bool = True) -> None:
        self._table = table
        self._skip = table.special_ids if skip_special_tokens else frozenset()
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._strip_pending = table.strip_leading_space
        self._run = bytearray()  # pending byte-fallback run (SentencePiece only)

    def push(self, ids: Sequence[int]) -> str:
        kept = [i for i in ids if i not in self._skip]
        if not self._table.byte_fallback_ids:
            return self._post(self._utf8.decode(b"".join(self._table.token_bytes[i] for i in kept)))
        parts = []
        for i in kept:
            if i in self._table.byte_fallback_ids:
                self._run += self._table.token_bytes[i]
            else:
                parts.append(self._end_run())
                parts.append(self._table.token_bytes[i].decode("utf-8"))
        return self._post("".join(parts))

    def flush(self) -> str:
        return self._post(self._end_run() + self._utf8.decode(b"", final=True))

    def _end_run(self) -> str:
        if not self._run:
            return ""
        try:
            text = self._run.decode("utf-8")
        except UnicodeDecodeError:
            text = "\ufffd" * len(self._run)
        self._run.clear()
        return text

    def _post(self, text: str) -> str:
        if self._strip_pending and text:
            self._strip_pending = False
            if text.startswith(" "):
                text = text[1:]
        return text


class WindowDetokenizer:
    """Generic fallback: decode(ids[prefix:]) minus decode(ids[prefix:read]).  Emits text
    only when it does not end in an incomplete character (U+FFFD)."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._prefix = 0
        self._read = 0
        self._emitted = 0  # chars of decode(ids) already emitted, for flush

    def _decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=self._skip)

    def push(self, ids: Sequence[int]) -> str:
        self._ids.extend(ids)
        prefix_text = self._decode(self._ids[self._prefix : self._read])
        new_text = self._decode(self._ids[self._prefix :])
        if len(new_text) <= len(prefix_text) or new_text.endswith("\ufffd"):
            return ""
        delta = new_text[len(prefix_text) :]
        self._prefix, self._read = self._read, len(self._ids)
        self._emitted += len(delta)
        return delta

    def flush(self) -> str:
        # Whatever the window held back (a dangling partial character) is decoded in full.
        full = self._decode(self._ids)
        rest = full[self._emitted :] if len(full) >= self._emitted else ""
        self._emitted = len(full)
        return rest


class DetokenizerFactory:
    """Built once per tokenizer; makes one detokenizer per request."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.table = build_token_table(tokenizer)

    @property
    def strategy(self) -> str:
        return "byte-table" if self.table is not None else "window"

    def __call__(self, skip_special_tokens: bool = True) -> Detokenizer:
        if self.table is not None:
            return ByteTableDetokenizer(self.table, skip_special_tokens)
        return WindowDetokenizer(self.tokenizer, skip_special_tokens)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The whole-output reference the incremental path must equal."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
