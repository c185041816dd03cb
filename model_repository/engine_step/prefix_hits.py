"""How many prompt tokens the prefix cache could serve: an estimate, kept beside an engine whose
library reports no reuse counts (OpenVINO GenAI 2026.4.1: neither PipelineMetrics nor a
request's perf metrics say how many tokens came from the cache).

A prompt's tokens are cut into whole blocks, each block named by a hash of itself and every
block before it (so equal names mean an equal prefix, as in vLLM's and OpenVINO's prefix
caches); a block counts as a hit if an earlier prompt had it and it is still among the last
`capacity_blocks` blocks seen.  It counts prompts only (the blocks a request fills while it
generates are cached by the engine too, so multi-turn hits are if anything undercounted) and
models eviction as plain LRU."""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

# The KV-cache block of OpenVINO's CPU paged attention, in tokens (assumed from OpenVINO GenAI's
# CPU default; not read from the library, which does not expose it).
CPU_BLOCK_TOKENS = 32


class PrefixHitEstimator:
    def __init__(self, block_tokens: int = CPU_BLOCK_TOKENS, capacity_blocks: int = 65536) -> None:
        if block_tokens < 1 or capacity_blocks < 1:
            raise ValueError("'block_tokens' and 'capacity_blocks' must be >= 1")
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def lookup(self, prompt: Sequence[int]) -> tuple[int, int]:
        """(tokens in whole blocks, of those the leading ones an earlier prompt shared); then
        remembers this prompt's blocks."""
        whole = len(prompt) // self.block_tokens
        name, hits, missed = 0, 0, False
        for i in range(whole):
            name = hash((name, tuple(prompt[i * self.block_tokens : (i + 1) * self.block_tokens])))
            if not missed and name in self._blocks:
                hits += 1
            else:
                missed = True
            self._blocks[name] = None
            self._blocks.move_to_end(name)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
        return whole * self.block_tokens, hits * self.block_tokens
