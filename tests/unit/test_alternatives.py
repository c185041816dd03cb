"""Top-k alternatives (input top_logprobs): the log-softmax top k, the sink that scores each
sequence's tokens in order, and the LLM API's dicts on the PyTorch backend."""

import numpy as np
import pytest

from model_repository.engine_step.alternatives import AlternativesSink, top_k
from model_repository.engines.pytorch.outputs import alternatives

VOCAB = 8


class FakeScorer:
    """Logits that favour token (context length % VOCAB): the top-1 of each position says how
    many tokens the scoring had seen when it predicted it."""

    def __init__(self, fail_at: int | None = None):
        self.open = 0
        self.fail_at = fail_at

    def start(self, prompt):
        scorer = self
        scorer.open += 1

        class Scoring:
            seen = len(prompt)

            def extend(self, ids):
                if scorer.fail_at is not None and self.seen >= scorer.fail_at:
                    raise RuntimeError("boom")
                rows = []
                for _ in ids:
                    row = np.full(VOCAB, -5.0)
                    row[self.seen % VOCAB] = 5.0
                    rows.append(row)
                    self.seen += 1
                return np.asarray(rows)

            def close(self):
                scorer.open -= 1
        return Scoring()


class Sink:
    def __init__(self):
        self.sent, self.failed = [], []

    def is_cancelled(self):
        return False

    def send(self, ids, log_probs, cum, final, sequence=0, top=None):
        self.sent.append((sequence, list(ids), None if top is None else top.ids[:, 0].tolist(), final))

    def fail(self, message, code=None):
        self.failed.append(message)


def test_top_k_is_the_log_softmax_largest_first_ties_by_id():
    logits = np.array([[1.0, 3.0, 3.0, 0.0, 2.0]])
    top = top_k(logits, 3)
    assert top.ids.tolist() == [[1, 2, 4]]
    expected = logits - np.log(np.exp(logits).sum())
    assert top.log_probs[0] == pytest.approx(expected[0, [1, 2, 4]], abs=1e-6)
    assert top.ids.dtype == np.int32 and top.log_probs.dtype == np.float32


def test_each_sequence_is_scored_in_order_across_responses_and_closed_with_its_final():
    scorer, sink = FakeScorer(), Sink()
    alt = AlternativesSink(sink, scorer, prompt=[9, 9, 9], k=2)
    alt.send([4], [-0.1], -0.1, False, 0)
    alt.send([5, 6], [-0.1, -0.1], -0.3, False, 0)
    alt.send([7], [-0.1], -0.1, False, 1)  # sequence 1 starts from the prompt too
    alt.send([], [], -0.3, True, 0)  # a closing response: no tokens, no alternatives
    alt.send([6], [-0.1], -0.2, True, 1)
    assert sink.sent == [(0, [4], [3], False), (0, [5, 6], [4, 5], False), (1, [7], [3], False),
                         (0, [], [], True), (1, [6], [4], True)]
    assert scorer.open == 0


def test_a_scoring_failure_fails_that_request_once_and_cancels_it():
    scorer, sink = FakeScorer(fail_at=4), Sink()
    alt = AlternativesSink(sink, scorer, prompt=[1, 2, 3], k=1)
    alt.send([4], [-0.1], -0.1, False, 0)
    alt.send([5], [-0.1], -0.2, False, 0)
    alt.send([6], [-0.1], -0.3, True, 0)
    alt.fail("cancelled")
    assert len(sink.sent) == 1 and sink.failed == ["computing top_logprobs failed: boom"]
    assert alt.is_cancelled() and scorer.open == 0


def test_the_llm_api_dicts_become_ranked_alternatives():
    class Logprob:
        def __init__(self, logprob, rank):
            self.logprob, self.rank = logprob, rank

    # 1.2.x: exactly the top K; later versions add the sampled token (K + 1 entries)
    entry = {7: Logprob(-0.5, 1), 3: Logprob(-1.5, 2), 11: Logprob(-4.0, None)}
    assert alternatives(entry, 2) == ([7, 3], [-0.5, -1.5])
    with pytest.raises(ValueError, match="returned 3 alternatives.*asked 4"):
        alternatives(entry, 4)


class LogprobSink(Sink):
    def send(self, ids, log_probs, cum, final, sequence=0, top=None):
        self.sent.append((list(ids), list(log_probs), cum, top))


def test_a_response_with_alternatives_takes_every_log_prob_from_the_scorers_pass():
    # the library said -0.1 for each token; the scorer's distribution gives the chosen token
    # (the favoured one, then one that is not) its own numbers: those are what the response says
    scorer, sink = FakeScorer(), LogprobSink()
    alt = AlternativesSink(sink, scorer, prompt=[9, 9, 9], k=2)
    alt.send([3], [-0.1], -0.1, False, 0)  # position 3 favours token 3
    alt.send([0], [-0.1], -0.2, True, 0)  # position 4 favours token 4: 0 is an alternative's rival
    (ids1, lps1, cum1, top1), (ids2, lps2, cum2, top2) = sink.sent
    favoured = 5.0 - np.log(np.exp(5.0) + (VOCAB - 1) * np.exp(-5.0))
    other = -5.0 - np.log(np.exp(5.0) + (VOCAB - 1) * np.exp(-5.0))
    assert lps1 == pytest.approx([favoured], abs=1e-5) and lps2 == pytest.approx([other], abs=1e-5)
    # the chosen token's log prob is its own entry in the list where it is listed
    assert top1.ids[0, 0] == 3 and top1.log_probs[0, 0] == pytest.approx(lps1[0], abs=1e-6)
    assert top2.ids[0, 0] == 4
    # the cumulative log prob follows the scorer's numbers too
    assert cum1 == pytest.approx(favoured, abs=1e-5) and cum2 == pytest.approx(favoured + other, abs=1e-5)
