"""Fresh files whose inode numbers say nothing about what they hold.

Every run that shows a variant gets a fresh file (a check that only ran
``stat -c %i`` on the data told the variants apart by their consecutive inode numbers,
while the confirming re-run saw the same file). Fresh is not enough: file systems number
new files in creation order, so the copies made for a kill's confirmations, written
right after the mutant's, share its high inode bits, and a check on such a bit repeats
its verdict on them instead of drawing it anew, which is what ``luck`` assumes.

So files are not created when written: each directory gets a pool of empty files made
ahead, and every write takes one at random (``random.SystemRandom``). Controls, mutants
and confirmations of a directory draw from the same pool, so which inode a run sees is
exchangeable across what the run shows: an inode-driven check is a coin, and the luck
bound covers coins.
"""

from __future__ import annotations

import os
import random
import secrets
import threading
from pathlib import Path

__all__ = ["POOL_SIZE", "discard_pool", "fresh_file"]

POOL_SIZE = 256
"""Empty files made at once per directory (~3 ms; one write takes one)."""

_DRAW = random.SystemRandom()
_LOCK = threading.Lock()
_POOLS: dict[Path, list[Path]] = {}


def fresh_file(directory: Path) -> Path:
    """An empty file of ``directory`` no one has used, drawn at random from its pool
    (the caller opens it with ``O_WRONLY | O_NOFOLLOW`` and writes it).

    Raises:
        OSError: The pool could not be made.
    """
    with _LOCK:
        pool = _POOLS.get(directory)
        if not pool:
            for stale in [d for d in _POOLS if not d.is_dir()]:
                del _POOLS[stale]  # directories die with their episode
            pool = _POOLS[directory] = _make_pool(directory)
        return pool.pop(_DRAW.randrange(len(pool)))


def discard_pool(directory: Path) -> None:
    """Delete ``directory``'s unused pool files (the episode is over)."""
    with _LOCK:
        pool = _POOLS.pop(directory, [])
    for path in pool:
        path.unlink(missing_ok=True)


def _make_pool(directory: Path) -> list[Path]:
    pool = []
    for _ in range(POOL_SIZE):
        path = directory / secrets.token_hex(8)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
        pool.append(path)
    return pool
