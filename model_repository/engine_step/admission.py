"""Admission order for requests waiting in front of an engine: priority with aging.

The scale is TensorRT-LLM's executor request priority: a float, default 0.5
(`Request::kDefaultPriority = 0.5`, "Sets the execution priority of this request":
NVIDIA/TensorRT-LLM cpp/include/tensorrt_llm/executor/executor.h, read at stored commit
0165bd7ac275dae69796767cdbb71ce1963506f3, not confirmed at the v1.1.0 tag).  We take it in
[0, 1], higher first; the executor's own ordering was not read (which way it sorts is not
confirmed), and the Triton backend never sets it (contract/features.py, Feature.PRIORITY).

Aging: a waiting request's effective priority grows by `aging_per_s` for every second it
has waited, so a low-priority request is eventually admitted ahead of a stream of newer
high-priority ones (nothing starves). Ties: first come, first served.  The range [0, 1] is
checked where a request enters (contract/params.py RULES["priority"]); the queue trusts it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

DEFAULT_PRIORITY = 0.5
DEFAULT_AGING_PER_S = 0.1  # a 0.0 request overtakes fresh 1.0 ones after 10 s of waiting


@dataclass
class _Waiting(Generic[T]):
    item: T
    priority: float
    arrived: float
    seq: int


@dataclass
class AgingQueue(Generic[T]):
    """Waiting requests; `pop(now)` returns the one with the highest aged priority."""

    aging_per_s: float = DEFAULT_AGING_PER_S
    _waiting: list[_Waiting[T]] = field(default_factory=list)
    _seq: int = 0

    def push(self, item: T, arrived: float, priority: float = DEFAULT_PRIORITY) -> None:
        self._waiting.append(_Waiting(item, float(priority), arrived, self._seq))
        self._seq += 1

    def effective(self, w: _Waiting[T], now: float) -> float:
        return w.priority + self.aging_per_s * max(0.0, now - w.arrived)

    def pop(self, now: float, eligible: Callable[[float], bool] | None = None) -> T | None:
        """The waiting item with the highest aged priority among those whose (own, not aged)
        priority `eligible` accepts; None when none is."""
        if not self._waiting:
            raise IndexError("pop from an empty AgingQueue")
        candidates = [w for w in self._waiting if eligible is None or eligible(w.priority)]
        if not candidates:
            return None
        best = max(candidates, key=lambda w: (self.effective(w, now), -w.seq))
        self._waiting.remove(best)
        return best.item

    def remove_if(self, predicate: Callable[[T], bool]) -> list[T]:
        """Take out (in arrival order) and return the waiting items `predicate` selects."""
        kept: list[_Waiting[T]] = []
        taken: list[T] = []
        for w in self._waiting:
            if predicate(w.item):
                taken.append(w.item)
            else:
                kept.append(w)
        self._waiting = kept
        return taken

    def items(self) -> list[T]:
        return [w.item for w in self._waiting]

    def drain(self) -> list[T]:
        items = [w.item for w in sorted(self._waiting, key=lambda w: w.seq)]
        self._waiting.clear()
        return items

    def __len__(self) -> int:
        return len(self._waiting)
