"""Where /v1/responses keeps answers for `previous_response_id`, GET and DELETE: a bounded
in-memory store in the front's process.

What it keeps, per stored response (`store: true`, the default, and a completed or incomplete
answer): the response object as it was returned, and the conversation that leads to it (the
earlier responses' input and output items, this request's input items and its output items;
the items are shared between the entries of one chain, not copied).  `instructions` are not
part of the conversation (OpenAI does not carry them over either).

For how long: at most `ttl_s` seconds after it was stored (default 1 hour), and at most
`max_entries` responses (default 1,024): storing one more evicts the oldest.  A DELETE drops one
at once; a restart of the front drops them all.  Nothing is written to disk.

One process, one store: with several replicas of the front (the Helm chart's replicaCount > 1
or its autoscaler), a follow-up request may reach a replica that never saw the response it
names, so the chart turns the store off there (mode "off") and the front then refuses
`previous_response_id` with a message that says why, rather than answer as if the conversation
had no past.  No shared store is implemented yet."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

MODES = ("memory", "off")
DEFAULT_MAX_ENTRIES = 1024
DEFAULT_TTL_S = 3600.0

OFF_REASON = (
    "this server keeps no responses (its response store is off: --response-store off, which the Helm "
    "chart sets when the front runs as several replicas, since a follow-up request may reach a replica "
    "that never saw the response and no shared store is configured)"
)


@dataclass(frozen=True)
class StoreSettings:
    mode: str = "memory"  # memory | off
    max_entries: int = DEFAULT_MAX_ENTRIES
    ttl_s: float = DEFAULT_TTL_S

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"response store mode {self.mode!r} is not one of {MODES}")
        if self.max_entries < 1:
            raise ValueError(f"response store max_entries must be >= 1, got {self.max_entries}")
        if not self.ttl_s > 0:
            raise ValueError(f"response store ttl_s must be > 0, got {self.ttl_s}")


@dataclass(frozen=True)
class StoredResponse:
    response: dict  # the response object as returned
    conversation: tuple[dict, ...]  # input and output items up to and including this response
    stored_at: float  # the store's clock


class ResponseStore:
    """Bounded by count and age; thread-safe (the app is async, but tests and tools may share it)."""

    def __init__(self, settings: StoreSettings = StoreSettings(), clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self.clock = clock
        self._entries: OrderedDict[str, StoredResponse] = OrderedDict()  # oldest first
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.settings.mode != "off"

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._entries)

    def _expire(self) -> None:
        deadline = self.clock() - self.settings.ttl_s
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.stored_at > deadline:
                break
            self._entries.popitem(last=False)

    def put(self, response_id: str, response: dict, conversation: tuple[dict, ...]) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._expire()
            self._entries.pop(response_id, None)
            self._entries[response_id] = StoredResponse(response, tuple(conversation), self.clock())
            while len(self._entries) > self.settings.max_entries:
                self._entries.popitem(last=False)

    def get(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            self._expire()
            return self._entries.get(response_id)

    def delete(self, response_id: str) -> bool:
        with self._lock:
            self._expire()
            return self._entries.pop(response_id, None) is not None
