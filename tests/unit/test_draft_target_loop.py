"""tensorrt_llm_bls's draft-target loop (model_repository/engines/relay/draft_target.py) against
fake engines that answer as TensorRT-LLM's executor does for greedy requests: the target
returns its own greedy continuation (request_output_len tokens, fewer at the end id or a stop
word, the end id left out), whatever the drafts; the draft returns its own tokens."""

from __future__ import annotations

import numpy as np
import pytest

from model_repository.engine_step.word_lists import from_word_list, to_word_list
from model_repository.engines.relay.draft_target import (BATCH_REFUSAL, STREAMING_REFUSAL, DraftLoop, LoopCancelled,
                                                         num_draft_tokens, refusal, response_arrays)

END = 0
PROMPT = [5, 9, 2]


def target_next(sequence: list[int]) -> int:
    return (sum(sequence) * 31 + len(sequence) * 7) % 50 + 1  # never the end id


def draft_next(sequence: list[int]) -> int:
    """Right two times in three."""
    return target_next(sequence) if len(sequence) % 3 else 49


def greedy(next_token, sequence: list[int], count: int, end_at: int | None = None,
           stop_words: list[list[int]] = ()) -> list[int]:
    """What an engine generates: `end_at`: the end id after that many tokens in all (the
    prompt included); a stop word ends it (kept in the output, as TensorRT-LLM keeps it)."""
    out: list[int] = []
    while len(out) < count:
        if end_at is not None and len(sequence) + len(out) >= end_at:
            break
        out.append(next_token(sequence + out))
        if any(out[-len(w):] == w for w in stop_words if len(w) <= len(out)):
            break
    return out


class FakeEngines:
    def __init__(self, end_at: int | None = None, draft=draft_next) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.end_at = end_at
        self.draft = draft

    def __call__(self, model: str, arrays: dict) -> dict:
        self.calls.append((model, arrays))
        sequence = arrays["input_ids"][0].tolist()
        count = int(arrays["request_output_len"][0, 0])
        words = arrays.get("stop_words_list")
        stops = from_word_list(words) if words is not None else []
        if model == "draft":
            tokens = greedy(self.draft, sequence, count, stop_words=stops)
        else:
            tokens = greedy(target_next, sequence, count, self.end_at, stops)
        return {"output_ids": np.asarray(tokens, np.int32).reshape(1, 1, -1),
                "sequence_length": np.array([[len(tokens)]], np.int32),
                "output_log_probs": np.full((1, 1, len(tokens)), -0.5, np.float32)}


def engine_request(max_new: int, **extra) -> dict:
    arrays = {"input_ids": np.array([PROMPT], np.int32), "input_lengths": np.array([[3]], np.int32),
              "request_output_len": np.array([[max_new]], np.int32), "end_id": np.array([[END]], np.int32),
              "streaming": np.array([[False]])}
    arrays.update(extra)
    return arrays


def run(max_new: int, drafts: int, engines: FakeEngines | None = None, **extra):
    engines = engines or FakeEngines()
    result = DraftLoop(engine_request(max_new, **extra), drafts, engines, "draft", "target").run()
    return result, engines


@pytest.mark.parametrize("max_new", [1, 2, 7, 31])
@pytest.mark.parametrize("drafts", [1, 3, 4, 10])
def test_the_answer_is_the_targets_greedy_answer(max_new, drafts):
    result, engines = run(max_new, drafts)
    assert result.tokens == greedy(target_next, PROMPT, max_new)
    # every round asks the draft for at most `drafts` and never past the answer's end
    assert all(int(a["request_output_len"][0, 0]) <= drafts for m, a in engines.calls if m == "draft")
    assert sum(1 for m, _ in engines.calls if m == "target") == result.rounds


def test_a_perfect_draft_makes_rounds_of_drafts_plus_one():
    result, _ = run(20, 4, FakeEngines(draft=target_next))
    assert result.rounds == 4 and result.accepted == result.drafted == 16
    assert result.tokens == greedy(target_next, PROMPT, 20)


def test_accepted_drafts_are_the_prefix_the_target_repeats():
    result, engines = run(30, 3)
    accepted = 0
    for model, arrays in engines.calls:
        if model == "target" and "draft_input_ids" in arrays:
            draft = arrays["draft_input_ids"][0].tolist()
            out = greedy(target_next, arrays["input_ids"][0].tolist(), len(draft) + 1)
            accepted += next((k for k, (d, t) in enumerate(zip(draft, out)) if d != t), len(draft))
    assert result.accepted == accepted and 0 < accepted < result.drafted


def test_each_call_is_what_nvidias_bls_sends():
    _, engines = run(9, 4, return_perf_metrics=np.array([[True]]), min_tokens=np.array([[6]], np.int32))
    (m1, draft), (m2, target) = engines.calls[:2]
    assert (m1, m2) == ("draft", "target")
    for arrays in (draft, target):
        assert not arrays["streaming"].any() and arrays["exclude_input_in_output"].all()
        assert "return_perf_metrics" not in arrays  # the counts are the loop's own
    assert int(draft["request_output_len"][0, 0]) == int(draft["min_tokens"][0, 0]) == 4
    assert "draft_input_ids" not in draft
    assert target["draft_input_ids"].tolist() == [greedy(draft_next, PROMPT, 4)]
    assert int(target["request_output_len"][0, 0]) == 5
    assert int(target["min_tokens"][0, 0]) == 5  # the client's min_tokens (6), capped at what is asked
    # later rounds re-send the prompt and the tokens so far
    _, second = engines.calls[3]
    assert second["input_ids"][0].tolist()[:3] == PROMPT and int(second["input_lengths"][0, 0]) > 3


def test_the_last_round_drafts_no_further_than_the_answer_may_go():
    _, engines = run(5, 4)
    lengths = [int(a["request_output_len"][0, 0]) for _, a in engines.calls]
    assert sum(lengths[1::2]) >= 5 and lengths[-1] <= 5
    result, engines = run(1, 4)
    assert [m for m, _ in engines.calls] == ["target"] and result.drafted == 0  # no room for a draft


def test_the_end_id_ends_the_loop_at_once():
    result, engines = run(40, 4, FakeEngines(end_at=3 + 11))
    assert result.tokens == greedy(target_next, PROMPT, 40, end_at=14) and len(result.tokens) == 11
    model, last = engines.calls[-1]  # the round that met the end got fewer tokens than it asked; none followed
    asked = int(last["request_output_len"][0, 0])
    assert model == "target" and len(greedy(target_next, last["input_ids"][0].tolist(), asked, end_at=14)) < asked


def test_a_stop_word_across_rounds_ends_the_loop():
    plain = greedy(target_next, PROMPT, 30)
    word = plain[3:6]  # likely split between two rounds of 1 draft + 1
    words = to_word_list([word])[None]
    result, _ = run(30, 1, stop_words_list=words)
    assert result.tokens == plain[:6]


def test_log_probs_cover_the_whole_answer():
    result, _ = run(12, 3, return_log_probs=np.array([[True]]))
    out = response_arrays(result, engine_request(12, return_log_probs=np.array([[True]]),
                                                 return_perf_metrics=np.array([[True]])))
    assert out["output_ids"].shape == (1, 1, 12) and out["sequence_length"].tolist() == [[12]]
    assert out["output_log_probs"].shape == (1, 1, 12)
    assert out["cum_log_probs"][0, 0] == pytest.approx(-6.0)
    assert out["total_draft_tokens"][0, 0] == result.drafted
    assert out["acceptance_rate"][0, 0] == pytest.approx(result.accepted / result.drafted)
    plain = response_arrays(result, engine_request(12))
    assert set(plain) == {"output_ids", "sequence_length"}


def test_cancel_ends_the_loop_and_cancels_the_call_in_flight():
    cancelled = []
    holder: dict = {}

    def call(model, arrays):
        if model == "target":
            holder["loop"].cancel()
        return FakeEngines()(model, arrays)

    loop = DraftLoop(engine_request(30), 3, call, "draft", "target", cancel_call=lambda: cancelled.append(True))
    holder["loop"] = loop
    with pytest.raises(LoopCancelled):
        loop.run()
    assert cancelled == [True]


@pytest.mark.parametrize("request_inputs, engine_changes, message", [
    ({"num_draft_tokens": 5}, {}, "'num_draft_tokens' 5 exceeds the target engine's max_draft_len 4"),
    ({"num_draft_tokens": -1}, {}, "'num_draft_tokens' must be >= 0"),
    ({"num_draft_tokens": 2}, {"streaming": np.array([[True]])}, STREAMING_REFUSAL),
    ({"num_draft_tokens": 2}, {"input_ids": np.array([PROMPT, PROMPT], np.int32)}, BATCH_REFUSAL),
    ({"num_draft_tokens": 2}, {"num_return_sequences": np.array([[2]], np.int32)}, "'num_return_sequences' > 1"),
    ({"num_draft_tokens": 2}, {"guided_decoding_guide_type": np.array([[b"json"]], object)},
     "'guided_decoding_guide_type' is not supported with speculative decoding"),
])
def test_what_the_loop_refuses(request_inputs, engine_changes, message):
    request = {k: np.array([[v]], np.int32) for k, v in request_inputs.items()}
    assert message in refusal(request, engine_request(8, **engine_changes), max_draft_len=4)


def test_a_plain_request_takes_no_loop():
    assert num_draft_tokens({}) == 0 and num_draft_tokens({"num_draft_tokens": np.array([[0]], np.int32)}) == 0
    assert refusal({"num_draft_tokens": np.array([[4]], np.int32)}, engine_request(8), 4) is None
