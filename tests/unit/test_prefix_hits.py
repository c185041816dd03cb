"""The prefix-cache hit estimate of the CPU engine (its library reports no reuse counts)."""

import pytest

from model_repository.engine_step.prefix_hits import PrefixHitEstimator


def test_only_leading_whole_blocks_an_earlier_prompt_had_are_hits():
    est = PrefixHitEstimator(block_tokens=4)
    system = list(range(100, 112))  # 3 blocks
    assert est.lookup(system + [1, 2, 3, 4, 5]) == (16, 0)  # first time: 4 whole blocks, none seen
    assert est.lookup(system + [9, 9, 9, 9, 7]) == (16, 12)  # the shared system prompt: 3 blocks
    assert est.lookup(system + [1, 2, 3, 4]) == (16, 16)  # a repeat
    assert est.lookup([0] + system) == (12, 0)  # same tokens shifted: a different prefix, no hit
    assert est.lookup([1, 2, 3]) == (0, 0)  # shorter than a block: nothing to look up


def test_a_block_after_a_miss_is_not_a_hit_even_if_seen():
    est = PrefixHitEstimator(block_tokens=2)
    est.lookup([1, 1, 2, 2])
    assert est.lookup([5, 5, 2, 2]) == (4, 0)  # [2, 2] after another first block is another block


def test_least_recently_used_blocks_are_forgotten():
    est = PrefixHitEstimator(block_tokens=2, capacity_blocks=2)
    est.lookup([1, 1])
    est.lookup([2, 2])
    est.lookup([3, 3])  # evicts [1, 1]
    assert est.lookup([1, 1]) == (2, 0)
    assert est.lookup([3, 3]) == (2, 2)
    with pytest.raises(ValueError, match="'block_tokens'"):
        PrefixHitEstimator(block_tokens=0)
