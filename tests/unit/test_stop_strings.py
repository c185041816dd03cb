from hypothesis import given
from hypothesis import strategies as st

from model_repository.text.stop_strings import StopStringMatcher


def run(matcher, chunks, final=True):
    out = []
    for n, chunk in enumerate(chunks):
        r = matcher.feed(chunk, final=final and n == len(chunks) - 1)
        out.append(r.text)
        if r.stopped:
            return out, True
    return out, False


def test_cut_exactly_before_a_stop_string_spanning_chunks():
    out, stopped = run(StopStringMatcher(["User:"]), ["Hello there.\nUs", "er", ": what"])
    assert stopped and "".join(out) == "Hello there.\n"
    assert out == ["Hello there.\n", "", ""]  # no chunk ever carried part of the stop string


def test_held_text_is_released_when_it_turns_out_not_to_be_a_stop_string():
    out, stopped = run(StopStringMatcher(["User:"]), ["a Us", "ually b"])
    assert not stopped and out == ["a ", "Usually b"]


def test_earliest_of_several_stop_strings_wins():
    out, stopped = run(StopStringMatcher(["END", "\n\n"]), ["one\n\ntwo END"])
    assert stopped and out == ["one"]


def test_pending_prefix_is_emitted_at_the_end():
    out, stopped = run(StopStringMatcher(["###"]), ["value #", "#"])
    assert not stopped and "".join(out) == "value ##"


@given(text=st.text(alphabet="ab#\n", max_size=40), stop=st.text(alphabet="ab#", min_size=1, max_size=4),
       cuts=st.lists(st.integers(0, 40), max_size=10))
def test_any_chunking_gives_the_text_before_the_first_stop_string(text, stop, cuts):
    bounds = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in zip(bounds, bounds[1:])] or [""]
    out, stopped = run(StopStringMatcher([stop]), chunks)
    index = text.find(stop)
    assert "".join(out) == (text if index < 0 else text[:index])
    assert stopped == (index >= 0)
