"""samples.py without an LLM: reading CompletionOutputs by position, the held-back stop token,
best_of > n read whole, and the KV-cache gauge's reading (kv_gauge.py)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from model_repository.engines.pytorch.kv_gauge import KvCacheGauge
from model_repository.engines.pytorch.samples import Cursor, NewTokens, SampleReader


@dataclass
class Output:
    """A CompletionOutput: token_ids is the whole sequence; the diffs are deliberately stale."""

    token_ids: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    token_ids_diff: list = field(default_factory=lambda: [99])  # never read
    logprobs_diff: list = field(default_factory=lambda: [-9.0])


def test_a_cursor_reads_by_position_not_by_diff():
    cursor, out = Cursor(frozenset()), Output([5], [-0.5])
    assert cursor.read(out) == NewTokens([5], [-0.5])
    assert cursor.read(out) == NewTokens()  # another sample's step: nothing new here
    out.token_ids += [6, 7]
    out.logprobs += [-1.0, -2.0, -3.0]  # upstream may hold one more log prob than tokens (a cut stop)
    assert cursor.read(out) == NewTokens([6, 7], [-1.0, -2.0])
    assert Cursor(frozenset()).read(Output([5, 6], [])) == NewTokens([5, 6], [])  # no log probs asked


def test_a_trailing_stop_token_is_held_until_its_sample_goes_on():
    cursor, out = Cursor(frozenset({9})), Output([5, 9], [-0.5, -0.25])
    assert cursor.read(out) == NewTokens([5], [-0.5])
    assert cursor.read(out) == NewTokens()
    out.token_ids += [4]  # not a stop after all (min_tokens): it goes out with the next token
    out.logprobs += [-1.0]
    assert cursor.read(out) == NewTokens([9, 4], [-0.25, -1.0])


def test_best_of_more_than_n_is_read_whole_at_the_end_in_rank_order():
    reader = SampleReader(2, best_of=3, stop_ids=[9])
    assert reader.read([Output([1]), Output([2])], finished=False) == [NewTokens(), NewTokens()]
    assert reader.read([Output([2, 3, 9]), Output([1, 1])], finished=True) == [NewTokens([2, 3]), NewTokens([1, 1])]
    same = SampleReader(2, best_of=2)
    assert same.read([Output([1]), Output([])], finished=False) == [NewTokens([1]), NewTokens()]
    assert same.read([Output([1]), Output([2])], finished=False) == [NewTokens(), NewTokens([2])]


class Stats:
    """An IterationResult as upstream's: done after its first timeout until mark_undone()."""

    def __init__(self, stats):
        self.stats, self.done, self.rearmed = list(stats), False, 0

    def mark_undone(self):
        self.done, self.rearmed = False, self.rearmed + 1

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self.done or not self.stats:
            self.done = True
            raise StopAsyncIteration
        return self.stats.pop(0)


class Llm:
    def __init__(self, stats):
        self.result = Stats(stats)

    def get_stats_async(self, timeout=2):
        return self.result


def kv(used):
    return json.dumps({"kvCacheStats": {"maxNumBlocks": 100, "usedNumBlocks": used}})


def test_the_gauge_rearms_the_stats_and_reads_zero_only_when_idle():
    idle = {"value": False}
    gauge, llm = KvCacheGauge(0.01, lambda: idle["value"]), Llm([kv(10), kv(30)])
    asyncio.run(gauge.read(llm))
    assert gauge.usage == 0.3 and llm.result.done
    llm.result.stats.append(kv(40))  # queued after the timeout: upstream's iterable would end at once
    asyncio.run(gauge.read(llm))
    assert gauge.usage == 0.4 and llm.result.rearmed == 2
    asyncio.run(gauge.read(llm))  # nothing new, a request still in the engine: keep the last
    assert gauge.usage == 0.4
    idle["value"] = True
    asyncio.run(gauge.read(llm))
    assert gauge.usage == 0.0


def test_the_gauge_reads_a_plain_iterable_before_the_first_request():
    class NoStats:
        def get_stats_async(self, timeout=2):
            async def empty():
                if False:
                    yield
            return empty()

    gauge = KvCacheGauge(0.01, lambda: True)
    gauge.usage = 0.5
    asyncio.run(gauge.read(NoStats()))
    assert gauge.usage == 0.0
