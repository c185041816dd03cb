"""Stop strings matched on the text, across token boundaries.

Text that could be the beginning of a stop string is held back until the next delta
decides, so a streamed chunk never carries part of a stop string, and the output ends
exactly before the first stop string.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class StopResult:
    text: str  # safe to emit now
    stopped: bool  # a stop string was found; `text` ends right before it


class StopStringMatcher:
    def __init__(self, stop_strings: tuple[str, ...] | list[str]) -> None:
        self._stops = tuple(s for s in stop_strings if s)
        self._held = ""

    def feed(self, delta: str, final: bool = False) -> StopResult:
        if not self._stops:
            return StopResult(delta, False)
        buf = self._held + delta
        hits = [i for i in (buf.find(s) for s in self._stops) if i >= 0]
        if hits:
            self._held = ""
            return StopResult(buf[: min(hits)], True)
        if final:
            self._held = ""
            return StopResult(buf, False)
        keep = self._longest_stop_prefix_suffix(buf)
        self._held = buf[len(buf) - keep :] if keep else ""
        return StopResult(buf[: len(buf) - keep], False)

    def _longest_stop_prefix_suffix(self, buf: str) -> int:
        """Length of the longest suffix of `buf` that is a proper prefix of a stop string."""
        best = 0
        for s in self._stops:
            for n in range(min(len(s) - 1, len(buf)), best, -1):
                if buf.endswith(s[:n]):
                    best = n
                    break
        return best
