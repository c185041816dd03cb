"""Streamed text is byte-identical to the non-streamed text and to decoding all tokens at
once - for prompts whose answers hold CJK, emoji (with ZWJ), accents, RTL and code."""

from __future__ import annotations

import pytest

from client import ChatMessage, SamplingParams

pytestmark = pytest.mark.server

PROMPTS = [
    "Repeat exactly: 日本語のテキストです。東京は日本の首都です。",
    "Repeat exactly: 👨‍👩‍👧‍👦 🇫🇷 🙂🙃 ❤️",
    "Repeat exactly: naïve café, crème brûlée, São Paulo, Zürich, Ærø.",
    "Repeat exactly: مرحبا بالعالم שלום עולם",
    "Write a Python function with a docstring that adds two numbers.",
    "Translate to Chinese: I love programming.",
]
GREEDY = SamplingParams(max_tokens=64, temperature=0.0)


@pytest.mark.parametrize("prompt", PROMPTS)
def test_stream_equals_whole_equals_full_decode(layout_client, tokenizer, prompt):
    client = layout_client  # on every repository layout
    messages = [ChatMessage("user", prompt)]
    chunks = list(client.stream(messages, GREEDY))
    streamed = "".join(c.text for c in chunks)
    whole = client.generate(messages, GREEDY, stream=False)
    assert streamed.encode("utf-8") == whole.text.encode("utf-8")
    ids = [t for c in chunks for t in c.token_ids]
    assert ids == whole.token_ids
    assert streamed == tokenizer.decode([t for t in ids if t != 2], skip_special_tokens=True)
    assert chunks[-1].finish_reason == whole.finish_reason != ""
    assert all("\ufffd" not in c.text for c in chunks) or "\ufffd" in streamed
    assert len(chunks) > 1  # really streamed


def test_answers_do_contain_multibyte_text(client):
    texts = [client.generate([ChatMessage("user", p)], GREEDY).text for p in PROMPTS[:4]]
    assert sum(any(ord(ch) > 0x7F for ch in t) for t in texts) >= 2, texts


def test_prompt_is_not_echoed_unless_asked(client):
    prompt = "The capital of France is"
    plain = client.generate(prompt, SamplingParams(max_tokens=8, temperature=0.0))
    echoed = client.generate(prompt, SamplingParams(max_tokens=8, temperature=0.0, echo=True))
    assert not plain.text.startswith(prompt)
    assert echoed.text == prompt + plain.text


def test_a_first_token_time_is_reported_only_when_measured(client):
    streamed = client.generate("Hi", SamplingParams(max_tokens=4))
    whole = client.generate("Hi", SamplingParams(max_tokens=4), stream=False)
    assert 0 < streamed.ttft_s <= streamed.latency_s
    assert whole.ttft_s is None  # one response: there is no first-token time to report
