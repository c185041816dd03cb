import numpy as np
import pytest

from model_repository.engine_step.word_lists import from_word_list, to_word_list


def test_layout_matches_tensorrt_llm():
    arr = to_word_list([[5, 6], [7]])
    assert arr.tolist() == [[5, 6, 7], [2, 3, -1]]
    assert arr.dtype == np.int32


def test_round_trip_and_empty():
    words = [[1], [2, 3, 4], [9, 9]]
    assert from_word_list(to_word_list(words)) == words
    assert from_word_list(to_word_list([])) == []
    assert from_word_list(to_word_list(words)[np.newaxis]) == words  # with the batch dimension


@pytest.mark.parametrize("bad", [np.array([[1, 2], [3, -1]]), np.array([[1, 2], [1, 1]]), np.zeros((3, 2))])
def test_malformed(bad):
    with pytest.raises(ValueError):
        from_word_list(bad)
