"""The KV-cache usage gauge from the LLM's iteration stats, kept live.

LLM.get_stats_async(timeout) (row llm.get_stats_async) hands out one IterationResult for the
LLM's life (NVIDIA/TensorRT-LLM tensorrt_llm/executor/executor.py at ed53795b, aget_stats
319-332).  Its `async for` waits `timeout` for each next stat, and the first wait that times
out marks it done; done, every later `async for` ends at once, until mark_undone() - which the
executor calls only when a request is submitted (executor.py 238-250;
tensorrt_llm/executor/result.py at a678b91a, IterationResult 833-883).  Read as it is, the
gauge therefore freezes: at the last stat of the last request while the LLM is idle (no
iteration runs, no stat comes), and also while a request runs on if one iteration once took
longer than the timeout.

So each read re-arms the iterable first (mark_undone, where it has one: before the first
request get_stats_async returns a plain empty iterable), and a read that finds no stat while
the engine holds no request means the LLM is idle: no sequence holds a KV block, the gauge
reads 0.  (Blocks a finished request left for reuse are free to be evicted; upstream itself
reports nothing while idle, so 0 is the engine's reading, not an upstream stat.)
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from model_repository.engines.pytorch import outputs

log = logging.getLogger(__name__)


class KvCacheGauge:
    def __init__(self, period_s: float, idle: Callable[[], bool]) -> None:
        self.usage = 0.0
        self._period_s = period_s
        self._idle = idle  # the engine holds no request

    async def read(self, llm: Any) -> None:
        """One read of the stats queued since the last (waits up to the period for each)."""
        got = False
        try:
            stats = llm.get_stats_async(timeout=self._period_s)
            rearm = getattr(stats, "mark_undone", None)
            if rearm is not None:
                rearm()
            async for stat in stats:
                usage = outputs.kv_cache_usage(stat)
                if usage is not None:
                    self.usage, got = usage, True
        except Exception as e:  # stats are a nice-to-have: never a reason to stop serving
            log.debug("iteration stats unavailable: %s", e)
            return
        if not got and self._idle():
            self.usage = 0.0
