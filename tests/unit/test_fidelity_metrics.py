"""The fidelity math against hand-computed values (build_engines/fidelity/metrics.py)."""

import math

import numpy as np
import pytest

from build_engines.fidelity.metrics import (
    LogitComparison,
    first_difference,
    greedy_summary,
    kl_divergence,
    log_softmax,
    perplexity,
    token_nll,
)
from build_engines.fidelity.texts import windows


def test_log_softmax_is_normalized_and_shift_invariant():
    x = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -1000.0]])
    lp = log_softmax(x)
    assert np.allclose(np.exp(lp).sum(-1), 1.0)
    assert np.allclose(lp[1], [math.log(0.5), math.log(0.5), -2000.0 - math.log(2)])  # no overflow
    assert np.allclose(log_softmax(x + 7.0), lp)


def test_kl_divergence_by_hand():
    p, q = np.array([[0.5, 0.5]]), np.array([[0.9, 0.1]])
    expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert kl_divergence(np.log(p), np.log(q))[0] == pytest.approx(expected)
    assert kl_divergence(np.log(p), np.log(p))[0] == pytest.approx(0.0)
    # Direction: KL(P_ref || P_test), not symmetric.
    assert kl_divergence(np.log(q), np.log(p))[0] != pytest.approx(expected)


def test_perplexity_of_a_uniform_model_is_the_vocabulary_size():
    lp = log_softmax(np.zeros((5, 8)))
    nll = token_nll(lp, np.array([0, 1, 2, 3, 4]))
    assert perplexity(nll) == pytest.approx(8.0)


def test_comparison_summary():
    ref = np.array([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    test = np.array([[2.0, 0.0, 0.0], [3.0, 0.0, 0.0]])  # second position: another top-1
    c = LogitComparison()
    c.add(ref, test, np.array([0, 1]))
    s = c.summary()
    assert s["scored_tokens"] == 2
    assert s["same_top1_pct"] == pytest.approx(50.0)
    ref_lp, test_lp = log_softmax(ref), log_softmax(test)
    assert s["mean_kld"] == pytest.approx(kl_divergence(ref_lp, test_lp).mean())
    assert s["reference_ppl"] == pytest.approx(math.exp(-(ref_lp[0, 0] + ref_lp[1, 1]) / 2))
    assert s["ppl_change_pct"] > 0
    with pytest.raises(ValueError, match="shapes differ"):
        c.add(ref, test[:1], np.array([0, 1]))


def test_first_difference_and_greedy_summary():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2  # one stopped, the other went on
    s = greedy_summary([([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [9, 2, 3]), ([1, 2, 3, 4], [1, 2, 0, 4])])
    assert s == {"prompts": 3, "equal": 1, "first_difference_mean": pytest.approx((3 + 0 + 2) / 3),
                 "first_token_differs": 1}


def test_windows_score_every_token_once():
    spans = windows(2560, 1024, 512)
    assert spans[0] == (0, 1024, 1) and spans[1] == (512, 1536, 1024) and len(spans) == 4
    scored = [t for start, end, first in spans for t in range(first, end)]
    assert scored == list(range(1, 2560))  # 2,559 tokens, each once, in order
    assert sum(end - first for _, end, first in windows(24576, 1024, 512)) == 24575  # DESIGN.md's measurement
    # stride == window: no context to carry over, and a window's first token has no prediction
    assert windows(256, 128, 128) == [(0, 128, 1), (128, 256, 129)]


def test_blocks_of_positions_give_the_whole_window_result():
    """add() reduces in blocks of ROWS_PER_BLOCK rows; a window longer than a block, with a
    ragged last block, must give what the whole-array math gives."""
    from build_engines.fidelity.metrics import ROWS_PER_BLOCK

    rng = np.random.default_rng(0)
    n = 3 * ROWS_PER_BLOCK + 5
    ref = rng.normal(size=(n, 50)) * 3
    test = ref + rng.normal(size=(n, 50)) * 0.3
    targets = rng.integers(0, 50, n)
    c = LogitComparison()
    c.add(ref, test, targets)
    ref_lp, test_lp = log_softmax(ref), log_softmax(test)
    s = c.summary()
    assert s["scored_tokens"] == n
    assert s["mean_kld"] == pytest.approx(kl_divergence(ref_lp, test_lp).mean())
    assert s["p99_kld"] == pytest.approx(np.percentile(kl_divergence(ref_lp, test_lp), 99))
    assert s["engine_ppl"] == pytest.approx(perplexity(token_nll(test_lp, targets)))
    assert s["same_top1_pct"] == pytest.approx(100.0 * (ref.argmax(-1) == test.argmax(-1)).mean())
