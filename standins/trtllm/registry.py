"""mTritonRequestIdToRequestIds: the Triton request id string -> the executor ids of that
request; the only way a `stop` request finds its target.  Not thread-safe on its own: the
executor calls it under its lock (upstream: under mRequestIdToRequestDataMutex)."""

from __future__ import annotations


class TritonIdRegistry:
    def __init__(self) -> None:
        self._ids: dict[str, set[int]] = {}

    def register(self, triton_id: str, executor_ids: list[int]) -> None:
        """Row request_id.map: after a successful enqueue the entry is ASSIGNED (a duplicate id
        replaces the earlier request's entry); an empty id is never registered."""
        if triton_id:
            self._ids[triton_id] = set(executor_ids)

    def lookup(self, triton_id: str) -> set[int]:
        """Row stop.lookup: the stop request's own id; unknown or finished -> nothing."""
        return set(self._ids.get(triton_id, ()))

    def finished(self, triton_id: str, executor_id: int) -> None:
        """Row request_id.cleanup: drop the executor id; erase the entry once it is empty."""
        ids = self._ids.get(triton_id)
        if ids is None:
            return
        ids.discard(executor_id)
        if not ids:
            del self._ids[triton_id]

    def __len__(self) -> int:
        return len(self._ids)
