"""Bounded capture of one output stream: head and tail kept, the middle counted.

A command's output is model-controlled. ``cat`` of a 100 MB matrix, ``yes`` or a
runaway loop must not grow the harness's memory, so a stream is never buffered
whole: chunks are decoded incrementally, the first half of the budget is kept as the
head, and a bounded deque keeps the last half as the tail. Everything between is only
counted, so the elision marker can say how much was dropped. Memory stays at
``max_chars`` plus one chunk whatever the command prints.
"""

from __future__ import annotations

import codecs
from collections import deque

__all__ = ["StreamCapture", "elision_marker"]

# Room reserved for the marker when the text is clipped, so the rendered text stays
# within ``max_chars`` (the marker holds a count up to 20 digits).
_MARKER_RESERVE = 40


def elision_marker(n_chars: int) -> str:
    """The line that replaces ``n_chars`` dropped characters."""
    return f"\n...[{n_chars} chars elided]...\n"


class StreamCapture:
    """Accumulates one stream's bytes within a fixed character budget.

    Args:
        max_chars: The most characters ``text()`` returns, marker included.
    """

    def __init__(self, max_chars: int) -> None:
        if max_chars < 2 * _MARKER_RESERVE:
            raise ValueError(f"max_chars must be >= {2 * _MARKER_RESERVE}, got {max_chars}")
        self._max_chars = max_chars
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head_budget = max_chars // 2
        self._tail_budget = max_chars - self._head_budget
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self.total_chars = 0
        self.total_bytes = 0

    def feed(self, data: bytes) -> None:
        """Add a chunk of raw bytes."""
        self.total_bytes += len(data)
        self._add(self._decoder.decode(data))

    def _add(self, text: str) -> None:
        if not text:
            return
        self.total_chars += len(text)
        room = self._head_budget - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
            if not text:
                return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len > self._tail_budget:
            excess = self._tail_len - self._tail_budget
            first = self._tail[0]
            if len(first) <= excess:
                self._tail.popleft()
                self._tail_len -= len(first)
            else:
                self._tail[0] = first[excess:]
                self._tail_len -= excess

    @property
    def truncated(self) -> bool:
        """More characters arrived than ``text()`` can hold."""
        return self.total_chars > self._max_chars

    def text(self) -> str:
        """Flush the decoder and render head, marker and tail.

        Returns:
            The whole stream when it fits in ``max_chars``; otherwise its head and tail
            around ``elision_marker``, all within ``max_chars``.
        """
        self._add(self._decoder.decode(b"", final=True))
        head = "".join(self._head)
        tail = "".join(self._tail)
        if not self.truncated:
            return head + tail
        budget = self._max_chars - _MARKER_RESERVE
        n_head = budget // 2
        n_tail = budget - n_head
        kept_head = head[:n_head]
        kept_tail = tail[-n_tail:]
        elided = self.total_chars - len(kept_head) - len(kept_tail)
        return kept_head + elision_marker(elided) + kept_tail
