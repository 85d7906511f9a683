"""The workspace-size limit: a disk filler must not fill the host's disk.

``ulimit -f`` bounds one file, not how many: ``for i in $(seq 1000); do head -c 1G
/dev/zero > f$i; done`` stays under it and writes a terabyte into a workspace that
lives under the host's ``/tmp``. Neither bwrap nor an unprivileged harness can put a
quota on a directory of an ordinary file system, so the limit is enforced by
measuring: the harness sums the disk the workspace's entries take, polls that while a
command runs, and kills the command once it has grown the workspace past the limit
(status ``disk_limit``). The overshoot is what one command writes in one poll interval
(plus at most one file of ``max_file_mb``), not the disk.

What counts: every entry's allocated blocks, at least one block each (a million empty
files cost inodes, not blocks), each inode once (hard links), **except** the inodes the
harness staged — task data is hard-linked, takes no new disk, and can be larger than
any sensible limit. Decompressing a data file in place makes a new inode, which counts.

Only a command that *grows* the workspace past the limit is stopped: once over it,
``rm`` of the excess must still run.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

__all__ = ["DiskWatch", "inodes_under", "usage_bytes"]

_MIN_ENTRY_BYTES = 4096
# A poll never costs more than this share of the command's wall time.
_MAX_POLL_SHARE = 0.1


def inodes_under(root: Path) -> frozenset[tuple[int, int]]:
    """(device, inode) of every entry under ``root`` (not following links)."""
    found: set[tuple[int, int]] = set()
    for entry in _entries(root):
        found.add((entry.st_dev, entry.st_ino))
    return frozenset(found)


def usage_bytes(root: Path, exclude: frozenset[tuple[int, int]] = frozenset()) -> int:
    """Disk taken by the entries under ``root``, each inode once, ``exclude`` skipped."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for st in _entries(root):
        key = (st.st_dev, st.st_ino)
        if key in exclude or key in seen:
            continue
        seen.add(key)
        total += max(st.st_blocks * 512, _MIN_ENTRY_BYTES)
    return total


def _entries(root: Path):  # noqa: ANN202 - a generator of stat results
    stack = [os.fspath(root)]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as listing:
                for entry in listing:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # removed meanwhile
                    yield st
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
        except OSError:
            continue  # unreadable or removed meanwhile (a root harness reads everything)


class DiskWatch:
    """One command's watchdog over the workspace size (see the module docstring).

    Args:
        root: The workspace directory.
        limit_bytes: Largest allowed usage.
        exclude: Staged inodes, not counted.
        poll_s: Base interval between measurements while the command runs.
        start_bytes: Usage before the command, when the caller knows it (the last
            command's final measurement: nothing else writes the workspace).
    """

    def __init__(self, root: Path, limit_bytes: int, exclude: frozenset[tuple[int, int]],
                 poll_s: float, start_bytes: int | None = None) -> None:
        self._root = root
        self._limit = limit_bytes
        self._exclude = exclude
        self._base_poll_s = poll_s
        self.poll_s = poll_s
        self.last_bytes = start_bytes
        self.start_bytes = self.measure() if start_bytes is None else start_bytes

    def measure(self) -> int:
        """Current usage; stretches ``poll_s`` when measuring is slow."""
        started = time.monotonic()
        used = usage_bytes(self._root, self._exclude)
        cost = time.monotonic() - started
        self.poll_s = max(self._base_poll_s, cost / _MAX_POLL_SHARE)
        self.last_bytes = used
        return used

    def over(self) -> bool:
        """The workspace grew during the command and is now past the limit."""
        used = self.measure()
        return used > self._limit and used > self.start_bytes
