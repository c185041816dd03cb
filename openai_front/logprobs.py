"""Token ids + log probs -> OpenAI `logprobs` bodies (chat: content entries; completions:
the legacy tokens/token_logprobs/text_offset lists), with each token's text and UTF-8 bytes
from the checkpoint's tokenizer (a token that is part of a multi-byte character is shown as
OpenAI shows it: `bytes:\\xNN...` with the raw bytes in `bytes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from tokenizers import Tokenizer

from client.types import Alternatives
from model_repository.text.detokenizer import build_token_table


class TokenTexts:
    def __init__(self, tokenizer_dir: Path) -> None:
        tokenizer = Tokenizer.from_file(str(Path(tokenizer_dir) / "tokenizer.json"))
        table = build_token_table(tokenizer)
        if table is None:
            raise ValueError(f"{tokenizer_dir}: the tokenizer's decoder has no byte table; logprobs need one")
        self._bytes = table.token_bytes
        # Special tokens (end of turn, ...): the answer's text skips them, so chat logprobs do too.
        self.special_ids = frozenset(i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of a prompt sent as token ids (its tokens' bytes, joined); ValueError naming
        the first unknown id, or when the bytes are not UTF-8."""
        unknown = [t for t in ids if not 0 <= t < len(self._bytes)]
        if unknown:
            raise ValueError(f"token id {unknown[0]} is not in the vocabulary (0-{len(self._bytes) - 1})")
        try:
            return b"".join(self._bytes[t] for t in ids).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"the token ids do not decode to UTF-8 text ({e.reason} at byte {e.start})") from None

    def entry(self, token_id: int) -> tuple[str, list[int]]:
        raw = self._bytes[token_id] if 0 <= token_id < len(self._bytes) else b""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
        return text, list(raw)

    def _top(self, token_id: int, log_prob: float) -> dict:
        text, raw = self.entry(token_id)
        return {"token": text, "logprob": float(log_prob), "bytes": raw}

    def chat_content(
        self, ids: Sequence[int], log_probs: Sequence[float], tops: Sequence[Alternatives] = ()
    ) -> list[dict]:
        """`tops`: each token's most likely tokens (top_logprobs), most likely first; () for none.
        Special tokens are left out (OpenAI's tokens join to exactly the content, which has no
        end-of-turn token)."""
        out = []
        for i, (token_id, lp) in enumerate(zip(ids, log_probs)):
            if token_id in self.special_ids:
                continue
            alternatives = [self._top(t, a) for t, a in tops[i]] if i < len(tops) else []
            out.append(self._top(token_id, lp) | {"top_logprobs": alternatives})
        return out

    def completion(
        self, ids: Sequence[int], log_probs: Sequence[float], offset: int = 0, tops: Sequence[Alternatives] = ()
    ) -> dict:
        """The legacy shape; with `tops`, top_logprobs holds per token {text: log prob} of the
        most likely tokens and the chosen one (OpenAI: up to logprobs + 1 entries)."""
        tokens, offsets, top_logprobs = [], [], []
        for i, (token_id, lp) in enumerate(zip(ids, log_probs)):
            text, _ = self.entry(token_id)
            tokens.append(text)
            offsets.append(offset)
            offset += len(text)
            if i < len(tops):
                top = {self.entry(t)[0]: float(a) for t, a in tops[i]}
                top.setdefault(text, float(lp))
                top_logprobs.append(top)
        return {
            "tokens": tokens,
            "token_logprobs": [float(x) for x in log_probs],
            "text_offset": offsets,
            "top_logprobs": top_logprobs if tops else None,
        }
