"""A live progress line for long evaluations (no dependency, safe in CI logs).

On a terminal the line is redrawn in place, also between completions (elapsed time and
ETA keep moving while a slow model thinks). In a log file it prints a plain line at
most every 5% of the run, so a thousand attempts do not make a thousand lines.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from vera_env.evaluation.metrics import is_excluded
from vera_env.rollout import Attempt

__all__ = ["Progress"]


class Progress:
    """Counts finished attempts and draws ``[####....] 12/40 right 7 ...``.

    Args:
        total: Attempts this invocation will run.
        already: Attempts recorded before (a resumed run), shown in the count.
        stream: Where to draw (default stderr).
    """

    def __init__(self, total: int, *, already: int = 0, stream: TextIO | None = None) -> None:
        self.total, self.already = total, already
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.done = self.right = self.wrong = self.excluded = 0
        self.started = time.perf_counter()
        self._last_pct = -1

    def update(self, attempt: Attempt) -> None:
        """Count one finished attempt and redraw."""
        self.done += 1
        if is_excluded(attempt):
            self.excluded += 1
        elif attempt.correct:
            self.right += 1
        else:
            self.wrong += 1
        self.draw()

    def line(self) -> str:
        """The progress text."""
        width = 24
        filled = width * self.done // max(self.total, 1)
        elapsed = time.perf_counter() - self.started
        rate = self.done / elapsed * 60 if elapsed > 0 and self.done else 0.0
        eta = (self.total - self.done) / (rate / 60) if rate else None
        done = self.already + self.done
        return (f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.already + self.total}"
                f"  right {self.right}  wrong {self.wrong}  excluded {self.excluded}"
                f"  {rate:.1f} ep/min  elapsed {_clock(elapsed)}"
                f"  eta {_clock(eta) if eta is not None else '?'}")

    def draw(self) -> None:
        """Redraw (terminal) or print a line when another 5% is done (log)."""
        if self.tty:
            self.stream.write("\r" + self.line() + "\x1b[K")
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            pct = 100 * self.done // max(self.total, 1)
            if pct // 5 == self._last_pct // 5 and self.done < self.total:
                return
            self._last_pct = pct
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def tick(self) -> None:
        """Redraw the clock on a terminal (call about once a second)."""
        if self.tty and self.done < self.total:
            self.stream.write("\r" + self.line() + "\x1b[K")
            self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
