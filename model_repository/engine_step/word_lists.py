"""TensorRT-LLM's word-list layout (`stop_words_list`, `bad_words_list`): shape [2, N];
row 0 is every word's token ids concatenated, row 1 the cumulative end offset of each word,
padded with -1.  [[5, 6], [7]] -> [[5, 6, 7], [2, 3, -1]].  One encoder, one decoder."""

from __future__ import annotations

import numpy as np


def to_word_list(words: list[list[int]]) -> np.ndarray:
    flat = [t for w in words for t in w]
    offsets = np.cumsum([len(w) for w in words]).tolist() if words else []
    width = max(len(flat), 1)
    out = np.full((2, width), -1, dtype=np.int32)
    out[0, : len(flat)] = flat if flat else []
    if not flat:
        out[0, 0] = 0  # an empty list: one pad id, no offsets
    out[1, : len(offsets)] = offsets
    return out


def from_word_list(array: np.ndarray) -> list[list[int]]:
    """Inverse of to_word_list; raises ValueError on a malformed layout."""
    arr = np.asarray(array)
    if arr.ndim == 3 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 2 or arr.shape[0] != 2:
        raise ValueError(f"expected shape [2, N], got {list(np.asarray(array).shape)}")
    ids, offsets = arr[0].tolist(), arr[1].tolist()
    words, start = [], 0
    for i, end in enumerate(offsets):
        if end < 0:
            break
        if end == start:
            raise ValueError(f"word {i} is empty (offset {end} repeats); every word needs at least one token id")
        if end < start or end > len(ids):
            raise ValueError(f"offsets must increase and stay within the {len(ids)} ids, got {offsets}")
        words.append(ids[start:end])
        start = end
    return words
