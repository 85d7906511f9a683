"""The progress bar of long runs (``vera-env eval``, ``tasks validate``), drawn by tqdm.

tqdm, because terminal width, rates and non-terminal output are what a well-kept
library already does. The bar counts turns (``step``) and names the latest one, not only
episodes: on a CPU model, where one turn takes minutes, a bar that moves when an episode
ends sits for ten minutes at "0 recorded" looking dead. A turn shows when it starts too
(``turn``: "seq.gc.easy.s0 turn 1: generating"): ``vera-env eval`` of a local
checkpoint on CPU spent its first three minutes in the first generation with nothing
but a clock to show for it. The tally of right / wrong / excluded moves as attempts
finish.

On a terminal it redraws in place; in a log file it writes a whole line (tqdm's text)
at the first change, then at most every ``log_interval_s`` seconds (10 by default: no
log is silent for long), and at the end, so a thousand attempts do not make a thousand
lines and a log holds no carriage returns.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from tqdm import tqdm

from vera_env.evaluation.metrics import is_excluded
from vera_env.rollout import Attempt

__all__ = ["Progress"]


class Progress:
    """A bar over attempts (or tasks) with the tally and a live turn counter.

    Args:
        total: Items this invocation will run.
        already: Items recorded before (a resumed run), shown in the count.
        unit: What is counted (``attempt``, ``task``).
        stream: Where to draw (default stderr).
        log_interval_s: Least seconds between lines when ``stream`` is not a terminal.
    """

    def __init__(self, total: int, *, already: int = 0, unit: str = "attempt",
                 stream: TextIO | None = None, log_interval_s: float = 10.0) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()
        self._interval_s, self._logged = log_interval_s, time.monotonic()
        self._spoken = False  # a log gets its first line at the first change
        self.right = self.wrong = self.excluded = self.turns = 0
        self._lock = threading.Lock()  # validation reports from worker threads
        self._bar = tqdm(total=already + total, initial=already, unit=unit,
                         file=self._stream if self._tty else _Discard(),
                         # A log's line is never cut to a width: the latest turn ends it.
                         dynamic_ncols=self._tty, ncols=None,
                         ascii=not self._tty, disable=False, mininterval=0.1,
                         bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} "
                                    "[{elapsed}<{remaining}, {rate_fmt}]{postfix}")

    @property
    def done(self) -> int:
        """Items finished, those recorded before included."""
        return int(self._bar.n)

    def update(self, attempt: Attempt) -> None:
        """Count one finished attempt in the tally."""
        with self._lock:
            self._tally(attempt)
            self._show(f"{attempt.task_id} {attempt.status}", advance=True)

    def _tally(self, attempt: Attempt) -> None:
        if is_excluded(attempt):
            self.excluded += 1
        elif attempt.correct:
            self.right += 1
        else:
            self.wrong += 1

    def turn(self, attempt: Attempt) -> None:
        """Show that a turn was asked of the policy (called before every turn)."""
        with self._lock:
            self._show(f"{attempt.task_id} turn {len(attempt.steps) + 1}: generating")

    def step(self, attempt: Attempt) -> None:
        """Count one turn played (called after every step of every attempt)."""
        with self._lock:
            self.turns += 1
            self._show(f"{attempt.task_id} turn {len(attempt.steps)}")

    def advance(self, label: str = "") -> None:
        """Count one finished item that is not an attempt (a validated task)."""
        with self._lock:
            self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(1)
            self._log(eager=True)

    def tick(self) -> None:
        """Redraw, so the clock moves while a slow model thinks (call about once a second)."""
        with self._lock:
            if self._tty and not self._bar.disable:
                self._bar.refresh()
            self._log()

    def line(self) -> str:
        """The bar's text now (what a terminal shows)."""
        return str(self._bar)

    def _show(self, latest: str, *, advance: bool = False) -> None:
        self._bar.set_postfix_str(f"right {self.right} wrong {self.wrong} excluded "
                                  f"{self.excluded} turns {self.turns} | {latest}",
                                  refresh=False)
        if advance:
            self._bar.update(1)
        elif self._tty:
            self._bar.refresh()
        self._log(eager=True)

    def _log(self, *, final: bool = False, eager: bool = False) -> None:
        """Write a line to a log: at the end, at the first change (``eager``), or when
        the last line is ``log_interval_s`` old."""
        if self._tty or self._bar.disable:  # a terminal redraws itself; closed: nothing
            return
        now = time.monotonic()
        if final or (eager and not self._spoken) or now - self._logged >= self._interval_s:
            self._logged, self._spoken = now, True
            self._stream.write(self.line() + "\n")
            self._stream.flush()

    def close(self) -> None:
        """Draw the last state and release the line. Idempotent."""
        with self._lock:
            if not self._bar.disable:
                self._log(final=True)
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Discard:
    """Where tqdm draws when the stream is a log: ``Progress`` writes whole lines there."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None
