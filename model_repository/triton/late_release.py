"""Holds finished BLS response iterators for a while, so that the Python reference is the last
one dropped: the workaround of a Python-backend bug that corrupts a stub's heap.

The bug (python_backend r24.10, the Triton 2.51 server the CPU deployment runs; fixed in
r24.12 by PR #390, commit b771f4f, "Hold GIL when deleting numpy array"):
- A decoupled BLS call's `ResponseIterator` keeps every response it received
  (src/pb_response_iterator.cc `responses_`), and the stub keeps the iterator too, in
  `response_iterator_map_` (src/pb_stub.cc `GetResponseIterator`).
- When the last response has been read, `ResponseIterator::Clear` queues a cleanup; the stub's
  `ServiceStubToParentRequests` thread then erases the map's entry (`Stub::SendCleanupId`),
  without the GIL.
- If Python dropped its reference first, that erase destroys the iterator there: its responses'
  `PbTensor`s, whose destructor (src/pb_tensor.cc `~PbTensor`, r24.10) releases their numpy
  arrays without the GIL, racing every Python thread of the stub.  Freed numpy objects corrupt
  the interpreter's allocator, and a later allocation crashes the stub: SIGSEGV "at 1" in
  libpython under `PyType_GenericAlloc` / `PyArray_NewFromDescr`.  Measured here: the
  tensorrt_llm_bls stub died after 2 to 14 rounds of 12 concurrent draft loops (3 runs of 3).
Triton does not fail the requests of a dead stub: their clients wait forever.

Holding each finished iterator for `hold_s` lets the cleanup thread's erase (a message to the
server and back, milliseconds) come first; the hold is then released on a Python thread, with
the GIL.  Newer Python backends need none of this and lose nothing by it.

Nothing here imports Triton: tests drive it with any objects.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable


class LateRelease:
    """Keeps objects for `hold_s` seconds; each `hold` drops those kept longer (on the caller's
    thread, outside the lock)."""

    def __init__(self, hold_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._hold_s = hold_s
        self._clock = clock
        self._lock = threading.Lock()
        self._held: deque[tuple[float, object]] = deque()

    def hold(self, obj: object) -> None:
        now = self._clock()
        with self._lock:
            self._held.append((now + self._hold_s, obj))
            expired = []
            while self._held and self._held[0][0] <= now:
                expired.append(self._held.popleft())
        expired.clear()  # the last references of those, dropped here

    def release_all(self) -> None:
        with self._lock:
            held, self._held = self._held, deque()
        held.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._held)
