"""The rule that decides whether a numerics setting may serve top_logprobs: the pipeline's greedy
token is the scorer's top-1 (ties within the tolerance aside) and its two log probs agree."""

import numpy as np
import pytest

from build_engines.fidelity.logprob_agreement import LOGPROB_TOLERANCE, LogprobAgreement, combine, compare


def _log_softmax(row):
    row = np.asarray(row, dtype=np.float64)
    return row - np.log(np.exp(row - row.max()).sum()) - row.max()


def test_the_same_distribution_agrees():
    logits = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0]])
    lps = [_log_softmax(logits[0])[0], _log_softmax(logits[1])[1]]
    result = compare([0, 1], lps, logits)
    assert result == LogprobAgreement(2, 0, 0.0) and result.agrees


def test_a_greedy_token_that_is_not_the_scorers_top_is_a_mismatch():
    logits = np.array([[3.0, 2.5, 0.0]])
    result = compare([1], [_log_softmax(logits[0])[1]], logits)
    assert result.top1_mismatches == 1 and not result.agrees


def test_a_tie_within_the_tolerance_is_not_a_mismatch():
    logits = np.array([[3.0, 3.0 - LOGPROB_TOLERANCE / 2, 0.0]])
    result = compare([1], [_log_softmax(logits[0])[1]], logits)
    assert result.top1_mismatches == 0 and result.agrees


def test_log_probs_apart_by_more_than_the_tolerance_disagree():
    # dynamic quantization on a Xeon with AMX: the token's two log probs up to 0.12 nats apart
    logits = np.array([[3.0, 1.0, 0.0]])
    result = compare([0], [_log_softmax(logits[0])[0] - 0.05], logits)
    assert result.top1_mismatches == 0 and result.max_gap == pytest.approx(0.05) and not result.agrees


def test_combined_over_sequences_and_round_tripped():
    total = combine([LogprobAgreement(3, 0, 0.0001), LogprobAgreement(5, 1, 0.002)])
    assert total == LogprobAgreement(8, 1, 0.002)
    assert LogprobAgreement.from_dict(total.to_dict()) == total and total.to_dict()["agrees"] is False
    assert not LogprobAgreement(0, 0, 0.0).agrees  # nothing measured agrees with nothing
