"""Postprocessing: per-stream state, end detection, finish reasons, stop strings, eviction."""

import pytest

from contract.finish import FinishReason
from model_repository.text.detokenizer import DetokenizerFactory
from model_repository.text.postprocess_params import PostprocessParams
from model_repository.text.stream_postprocessor import StreamPostprocessor

EOS = 2


@pytest.fixture(scope="module")
def factory(tokenizer):
    return DetokenizerFactory(tokenizer)


def params(**kw):
    base = dict(stream_id="s1", max_tokens=100, end_ids=(EOS,), num_input_tokens=5, streaming=True)
    return PostprocessParams(**(base | kw)).to_json()


def ids(tokenizer, text):
    return tokenizer.encode(text, add_special_tokens=False).ids


def feed(post, p, token_lists):
    return [post.process(p, t) for t in token_lists]


def test_stream_text_and_eos(tokenizer, factory):
    post = StreamPostprocessor(factory)
    toks = ids(tokenizer, "Hello 世界!")
    outs = feed(post, params(), [[t] for t in toks] + [[EOS]])
    assert "".join(o.text for o in outs) == "Hello 世界!"
    assert [o.finish_reason for o in outs][-1] == FinishReason.STOP
    assert all(o.finish_reason == FinishReason.NONE for o in outs[:-1])
    assert outs[-1].num_output_tokens == len(toks) + 1 and outs[-1].num_input_tokens == 5
    assert len(post) == 0  # state released at the end


def test_length_limit(tokenizer, factory):
    post = StreamPostprocessor(factory)
    toks = ids(tokenizer, "one two three four five")
    outs = feed(post, params(max_tokens=3), [toks[:2], toks[2:]])
    assert outs[-1].finish_reason == FinishReason.LENGTH
    assert "".join(o.text for o in outs) == tokenizer.decode(toks[:3])
    assert outs[-1].num_output_tokens == 3


def test_stop_string_across_tokens_then_engine_overrun(tokenizer, factory):
    post = StreamPostprocessor(factory)
    toks = ids(tokenizer, "The answer is 42.\nUser: more")
    p = params(stop_strings=("\nUser:",))
    outs = feed(post, p, [[t] for t in toks])
    text = "".join(o.text for o in outs)
    assert text == "The answer is 42."
    reasons = [o.finish_reason for o in outs]
    first_stop = reasons.index(FinishReason.STOP)
    assert all(r == FinishReason.STOP for r in reasons[first_stop:])  # later responses repeat the outcome
    assert all(o.text == "" for o in outs[first_stop + 1:])


def test_non_streaming_single_response(tokenizer, factory):
    post = StreamPostprocessor(factory)
    toks = ids(tokenizer, "whole answer")
    out = post.process(params(streaming=False), toks)
    assert (out.text, out.finish_reason) == ("whole answer", FinishReason.STOP)


def test_echo_and_special_tokens(tokenizer, factory):
    post = StreamPostprocessor(factory)
    toks = ids(tokenizer, "<|im_start|>x")
    out = post.process(params(streaming=False, echo_text="Prompt: ", skip_special_tokens=False), toks)
    assert out.text == "Prompt: <|im_start|>x"


def test_streams_are_independent_and_orphans_expire(tokenizer, factory):
    now = [0.0]
    post = StreamPostprocessor(factory, ttl_s=10, clock=lambda: now[0])
    a, b = params(stream_id="a"), params(stream_id="b")
    post.process(a, ids(tokenizer, "A"))
    post.process(b, ids(tokenizer, "B"))
    assert len(post) == 2
    now[0] = 11.0
    post.process(params(stream_id="c"), ids(tokenizer, "C"))
    assert len(post) == 1  # a and b were idle past the TTL (cancelled clients)


def test_a_response_without_tokens_ends_a_stream(tokenizer, factory):
    """TensorRT-LLM leaves the end id out of output_ids: a relay closes the stream with an
    empty response, which flushes the text and says why it ended."""
    post = StreamPostprocessor(factory)
    toks = ids(tokenizer, "Hello 世界!")
    outs = feed(post, params(), [[t] for t in toks] + [[]])
    assert "".join(o.text for o in outs) == "Hello 世界!"
    assert [o.finish_reason for o in outs][-1] == FinishReason.STOP
    assert all(o.finish_reason == FinishReason.NONE for o in outs[:-1])
    assert post.live_streams() == 0


def test_each_sequence_of_a_request_is_its_own_stream(tokenizer, factory):
    """num_return_sequences: the n samples share the request's detokenize_params; responses
    interleave and each sample keeps its own detokenizer, stop strings, count and end."""
    post = StreamPostprocessor(factory)
    p = params(stop_strings=("END",))
    a, b = ids(tokenizer, "Hello world"), ids(tokenizer, "Bonjour END le monde")
    outs: dict[int, list] = {0: [], 1: []}
    for i in range(max(len(a), len(b))):
        for seq, toks in ((0, a), (1, b)):
            if i < len(toks):
                outs[seq].append(post.process(p, [toks[i]], seq))
    outs[0].append(post.process(p, [EOS], 0))
    assert "".join(o.text for o in outs[0]) == "Hello world" and outs[0][-1].finish_reason == FinishReason.STOP
    assert "".join(o.text for o in outs[1]) == "Bonjour " and outs[1][-1].finish_reason == FinishReason.STOP
    assert outs[0][-1].num_output_tokens == len(a) + 1
    assert len(post) == 0
