"""The workspace-size limit: a disk filler must not fill the host's disk.

``ulimit -f`` bounds one file, not how many: ``for i in $(seq 1000); do head -c 1G
/dev/zero > f$i; done`` stays under it and writes a terabyte into a workspace that
lives under the host's ``/tmp``. Neither bwrap nor an unprivileged harness can put a
quota on a directory of an ordinary file system, so the limit is enforced by
measuring: the harness sums the disk the workspace's entries take, polls that while a
command runs, and kills the command once it has grown the workspace past the limit
(status ``disk_limit``). The overshoot is what one command writes in one poll interval
(plus at most one file of ``max_file_mb``), not the disk.

What counts: every entry's allocated blocks, at least one block each, each inode once
(hard links), **except** the inodes the harness staged — task data is hard-linked,
takes no new disk, and can be larger than any sensible limit. Decompressing a data
file in place makes a new inode, which counts. The entries themselves are limited too
(``max_workspace_inodes``): a million empty files cost inodes, and every measurement
walks them.

The walk (``walk``, the package's one filesystem walker) goes by directory handle
(``openat`` relative to the parent's descriptor, ``O_NOFOLLOW``), never by path, and
**fails closed**: what it cannot scan counts as over the limit. A walk by path skips
directories whose path passes PATH_MAX: 20 nested 250-character names, then 400 MB
written beneath them under a 50 MB limit, went unseen that way. A tree nested deeper
than ``MAX_DEPTH`` (one descriptor per level is held) or a directory the harness may
not read is a ``disk_limit`` until it is removed. A walk stops as soon as it knows the
answer (past the limit), so a poll costs at most ``limit`` entries.

Only a command that *grows* the workspace past the limit is stopped: once over it,
``rm`` of the excess must still run.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Generator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_DEPTH", "DiskWatch", "Usage", "inodes_under", "measure", "walk"]

MAX_DEPTH = 128
"""Directory levels ``walk`` descends, ``root`` included (it holds one descriptor per
level); a directory below them is marked unscanned."""
_MIN_ENTRY_BYTES = 4096
# A poll never costs more than this share of the command's wall time.
_MAX_POLL_SHARE = 0.1
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RACED = (FileNotFoundError, NotADirectoryError)


@dataclass(frozen=True, slots=True)
class Usage:
    """What the agent's entries under a workspace take.

    Attributes:
        bytes: Allocated bytes (at least one block per entry), each inode once.
        inodes: Distinct entries counted.
        complete: Everything was scanned. False: part of the tree could not be (too
            deep, unreadable), and the usage counts as over every limit.
        stopped: The walk stopped early, past a threshold: both numbers are lower bounds.
    """

    bytes: int
    inodes: int
    complete: bool = True
    stopped: bool = False


def inodes_under(root: Path) -> frozenset[tuple[int, int]]:
    """(device, inode) of every entry under ``root`` (not following links)."""
    found: set[tuple[int, int]] = set()

    def add(st: os.stat_result) -> bool:
        found.add((st.st_dev, st.st_ino))
        return False

    _walk(root, add)
    return frozenset(found)


def measure(root: Path, exclude: frozenset[tuple[int, int]] = frozenset(), *,
            stop_bytes: int | None = None, stop_inodes: int | None = None) -> Usage:
    """The usage of the entries under ``root``, ``exclude`` skipped.

    Args:
        root: The workspace directory.
        exclude: (device, inode) pairs not counted (the staged data).
        stop_bytes: Stop walking once the bytes pass this (``Usage.stopped``).
        stop_inodes: Stop walking once the entries pass this.
    """
    seen: set[tuple[int, int]] = set()
    totals = [0, 0]

    def count(st: os.stat_result) -> bool:
        key = (st.st_dev, st.st_ino)
        if key in exclude or key in seen:
            return False
        seen.add(key)
        totals[0] += max(st.st_blocks * 512, _MIN_ENTRY_BYTES)
        totals[1] += 1
        return ((stop_bytes is not None and totals[0] > stop_bytes)
                or (stop_inodes is not None and totals[1] > stop_inodes))

    complete, stopped = _walk(root, count)
    return Usage(totals[0], totals[1], complete, stopped)


def walk(root: Path, *, sort: bool = False
         ) -> Generator[tuple[str, os.stat_result | None], None, None]:
    """Every entry under ``root`` as (path relative to ``root``, its lstat); fails closed.

    The one walker of the package: the workspace's disk watch, strength's replay log and
    its shadows all walk trees a model may have shaped, so they share one depth bound
    and one answer for what cannot be seen. It goes by directory handle (``openat``
    relative to the parent's descriptor, ``O_NOFOLLOW``), never by path, so no path
    length hides a directory, and it never follows a link.

    What it cannot scan is *marked*, never skipped: it yields ``(path, None)`` for an
    entry it cannot stat, a directory it cannot open or list (``""`` for ``root``
    itself), and a directory more than ``MAX_DEPTH`` levels down (after that
    directory's own entry). The caller decides what blindness means for it (over the
    disk limit, a change to replay, a broken shadow). A missing ``root`` yields nothing
    (nothing of it takes disk), and an entry removed during the walk is left out.

    Args:
        root: The directory to walk.
        sort: Visit each directory's entries in name order (a walk that is hashed
            must not depend on the order the file system lists them in).

    Yields:
        ``(relative POSIX path, os.stat_result)``, or ``(path, None)`` where blind.
    """
    try:
        top = os.open(root, _DIR_FLAGS)
    except _RACED:
        return
    except OSError:
        yield "", None
        return
    listing = _listing(top, sort)
    if listing is None:
        os.close(top)
        yield "", None
        return
    stack: list[tuple[int, str, list[os.DirEntry[str]]]] = [(top, "", listing)]
    try:
        while stack:
            fd, prefix, entries = stack[-1]
            if not entries:
                os.close(fd)
                stack.pop()
                continue
            entry = entries.pop()
            path = prefix + entry.name
            try:
                st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
            except _RACED:
                continue  # removed meanwhile
            except OSError:
                yield path, None
                continue
            yield path, st
            if stat.S_ISDIR(st.st_mode) and not _descend(stack, fd, entry.name, path, sort):
                yield path, None
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _walk(root: Path, visit: Callable[[os.stat_result], bool]) -> tuple[bool, bool]:
    """Call ``visit`` on every entry under ``root``; returns (complete, stopped)."""
    complete = True
    with closing(walk(root)) as found:
        for _, st in found:
            if st is None:
                complete = False
            elif visit(st):
                return complete, True
    return complete, False


def _descend(stack: list[tuple[int, str, list[os.DirEntry[str]]]], parent: int, name: str,
             path: str, sort: bool) -> bool:
    """Push directory ``name`` of ``parent`` onto the walk; False where it cannot be."""
    if len(stack) >= MAX_DEPTH:
        return False
    try:
        child = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except _RACED:
        return True
    except OSError as exc:  # ELOOP: swapped for a link meanwhile; EACCES, EMFILE: fail closed
        return exc.errno == errno.ELOOP
    listing = _listing(child, sort)
    if listing is None:
        os.close(child)
        return False
    stack.append((child, path + "/", listing))
    return True


def _listing(fd: int, sort: bool) -> list[os.DirEntry[str]] | None:
    """A directory's entries, last to visit first (the walk pops from the end)."""
    try:
        with os.scandir(fd) as entries:
            found = list(entries)
    except OSError:
        return None
    if sort:
        found.sort(key=lambda e: e.name, reverse=True)
    return found


class DiskWatch:
    """One command's watchdog over the workspace size (see the module docstring).

    Args:
        root: The workspace directory.
        limit_bytes: Largest allowed usage.
        exclude: Staged inodes, not counted.
        poll_s: Base interval between measurements while the command runs.
        start: Usage before the command, when the caller knows it (the last
            command's final measurement: nothing else writes the workspace).
        limit_inodes: Most entries allowed.
        shared_full: True while a file system the workspace shares with others is full
            (``capped.CappedArea.spent``): a command running then may have been refused
            disk by the kernel (ENOSPC), so it counts as over the limit.
    """

    def __init__(self, root: Path, limit_bytes: int, exclude: frozenset[tuple[int, int]],
                 poll_s: float, start: Usage | None = None, *,
                 limit_inodes: int | None = None,
                 shared_full: Callable[[], bool] | None = None) -> None:
        self._root = root
        self._shared_full = shared_full
        self._limit = limit_bytes
        self._limit_inodes = limit_inodes
        self._exclude = exclude
        self._base_poll_s = poll_s
        self.poll_s = poll_s
        self.last: Usage | None = start
        self.start = self.measure(full=True) if start is None else start

    def measure(self, *, full: bool = False) -> Usage:
        """Current usage; stretches ``poll_s`` when measuring is slow.

        Args:
            full: Walk everything (the measurement the next command starts from);
                otherwise stop once the walk is past the limit and the start.
        """
        started = time.monotonic()
        if full:
            used = measure(self._root, self._exclude)
        else:
            start = self.start
            stop_inodes = (None if self._limit_inodes is None
                           else max(self._limit_inodes, start.inodes))
            used = measure(self._root, self._exclude, stop_bytes=max(self._limit, start.bytes),
                           stop_inodes=stop_inodes)
        cost = time.monotonic() - started
        self.poll_s = max(self._base_poll_s, cost / _MAX_POLL_SHARE)
        self.last = used
        return used

    def over(self, *, full: bool = False) -> bool:
        """The workspace grew during the command and is now past a limit, cannot be
        measured at all, or shares a file system that is full (fail closed)."""
        used = self.measure(full=full)
        if self._shared_full is not None and self._shared_full():
            return True
        if not used.complete:
            return True
        if used.stopped:
            return True  # past max(limit, start): over and grown
        start = self.start
        too_big = used.bytes > self._limit and used.bytes > start.bytes
        too_many = (self._limit_inodes is not None and used.inodes > self._limit_inodes
                    and used.inodes > start.inodes)
        return too_big or too_many
