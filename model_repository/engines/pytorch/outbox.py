"""Responses leave the engine's loop through one thread, in the order they were posted, so a
slow client (or Triton's IPC) never holds up the loop that feeds the LLM.  NVIDIA's llmapi
model sends from a response thread for the same reason."""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

log = logging.getLogger(__name__)


class Outbox:
    """One thread that runs the sinks' calls in the order they were posted."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="pytorch-engine-outbox", daemon=True)
        self._thread.start()

    def post(self, call: Callable, *args) -> None:
        self._queue.put((call, args))

    def close(self, timeout_s: float = 5.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            call, args = item
            try:
                call(*args)
            except Exception:  # a broken response must not stop the others
                log.exception("sending a response failed")
