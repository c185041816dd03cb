"""Incremental detokenization is byte-exact with decoding the whole output at once."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from model_repository.text.detokenizer import (
    ByteTableDetokenizer,
    DetokenizerFactory,
    WindowDetokenizer,
    build_token_table,
)

VOCAB = 49152  # SmolLM2
SPECIAL = [0, 1, 2, 3, 4, 16]


@pytest.fixture(scope="module")
def factory(tokenizer):
    return DetokenizerFactory(tokenizer)


def stream(detok, ids, cuts):
    out, start = [], 0
    for cut in sorted(set(c % (len(ids) + 1) for c in cuts)) + [len(ids)]:
        out.append(detok.push(ids[start:cut]))
        start = max(start, cut)
    out.append(detok.flush())
    return out


ids_strategy = st.lists(st.one_of(st.integers(0, VOCAB - 1), st.sampled_from(SPECIAL), st.integers(100, 400)), max_size=60)
cuts_strategy = st.lists(st.integers(0, 1000), max_size=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=ids_strategy, cuts=cuts_strategy, skip=st.booleans())
def test_byte_table_stream_equals_full_decode(factory, ids, cuts, skip):
    assert factory.strategy == "byte-table"
    assert "".join(stream(factory(skip), ids, cuts)) == factory.decode(ids, skip)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=ids_strategy, cuts=cuts_strategy, skip=st.booleans())
def test_window_fallback_stream_equals_full_decode(tokenizer, factory, ids, cuts, skip):
    assert "".join(stream(WindowDetokenizer(tokenizer, skip), ids, cuts)) == factory.decode(ids, skip)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=80), cuts=cuts_strategy)
def test_real_text_round_trips_and_never_emits_replacement_chars(tokenizer, factory, text, cuts):
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    chunks = stream(factory(True), ids, cuts)
    full = tokenizer.decode(ids, skip_special_tokens=True)
    assert "".join(chunks) == full
    if "\ufffd" not in full:
        assert all("\ufffd" not in c for c in chunks)  # multi-byte characters are held, not split


UNICODE_SAMPLES = ["日本語のテキスト", "👨‍👩‍👧‍👦 family", "naïve café crème brûlée", "مرحبا بالعالم", "def f(x):\n    return x  # ✓",
                   "🇫🇷🏳️‍🌈", "  leading  and   multiple spaces ", "Ω≈ç√∫˜µ≤≥÷"]


@pytest.mark.parametrize("text", UNICODE_SAMPLES)
def test_one_token_at_a_time(tokenizer, factory, text):
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    detok = factory(True)
    chunks = [detok.push([i]) for i in ids] + [detok.flush()]
    assert "".join(chunks) == text
    assert all("\ufffd" not in c for c in chunks)


def test_special_tokens_are_skipped_or_kept(tokenizer, factory):
    ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>", add_special_tokens=False).ids
    assert "".join(stream(factory(True), ids, [])) == "user\nhi"
    assert "".join(stream(factory(False), ids, [])) == "<|im_start|>user\nhi<|im_end|>"


def test_dangling_bytes_are_replaced_at_flush_like_full_decode(tokenizer, factory):
    ids = tokenizer.encode("日", add_special_tokens=False).ids
    assert len(ids) > 1  # the character spans several byte tokens
    detok = factory(True)
    assert detok.push(ids[:1]) == ""  # held back: not a character yet
    assert detok.flush() == tokenizer.decode(ids[:1]) == "\ufffd"


def _sentencepiece_tokenizer() -> Tokenizer:
    """A tiny Llama-2 style tokenizer: Metaspace, byte fallback, Strip decoder."""
    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "▁hello", "▁world", "a", "b", "▁a"]
    vocab = {p: i for i, p in enumerate(pieces)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("▁", "a")], unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<s>", "</s>"])
    return tok


SENTENCEPIECE = _sentencepiece_tokenizer()


@settings(max_examples=300, deadline=None)
@given(ids=st.lists(st.integers(0, 264), max_size=30), cuts=cuts_strategy, skip=st.booleans())
def test_sentencepiece_byte_fallback_decoder(ids, cuts, skip):
    tok = SENTENCEPIECE
    table = build_token_table(tok)
    assert table is not None and table.strip_leading_space
    assert "".join(stream(ByteTableDetokenizer(table, skip), ids, cuts)) == tok.decode(ids, skip_special_tokens=skip)


def test_unknown_decoder_falls_back_to_window():
    tok = _sentencepiece_tokenizer()
    spec = json.loads(tok.to_str())
    spec["decoder"] = {"type": "WordPiece", "prefix": "##", "cleanup": True}
    assert DetokenizerFactory(Tokenizer.from_str(json.dumps(spec))).strategy == "window"


def test_cost_per_token_does_not_grow_with_length(tokenizer, factory):
    """O(1) amortized: the bytes looked at per push do not depend on what came before."""
    import time

    ids = tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 400, add_special_tokens=False).ids
    detok = factory(True)

    def timed(chunk):
        t = time.perf_counter()
        for i in chunk:
            detok.push([i])
        return (time.perf_counter() - t) / len(chunk)

    early, late = timed(ids[:500]), (timed(ids[500:-500]), timed(ids[-500:]))[1]
    assert late < early * 5  # generous: timing noise, not growth (a re-decode would be ~8x here)
