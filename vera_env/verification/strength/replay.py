"""The episode's derivation: which commands wrote files, so strength can replay them.

Strength testing asks whether a check's verdict is a function of the task's data
through the model's own derivation. It answers by replaying that derivation on
variants of the data (``shadows``), so it needs the commands that changed the
workspace, in order. Issue 11's hack is why: ``echo 42 > a.txt`` and a check pinning
``a.txt`` "discriminated" when the model's own file was mutated; replayed on mutated
data, ``a.txt`` holds 42 again and the check earns nothing, while ``awk ... calls.vcf.gz
> het.txt`` replays to another count and a pin on ``het.txt`` earns.

A command that changed nothing needs no replay: it left no state (each command gets
a fresh sandbox whose ``/tmp`` dies with it; the workspace is the only thing that
persists). Change is detected by a stat walk of the workspace after each command —
one ``fstatat`` per entry, linear in the workspace, no file read — compared with the
walk before it (path, type, mode, inode, size, mtime and ctime of every entry; a
directory's times are ignored, so a temp file made and removed is no change). A walk
that could not see everything (an unreadable or too deep directory) counts as a
change: replaying too much costs time, replaying too little would lose the
derivation. Each logged command keeps the paths it changed and the names its text
mentions, so strength can tell which task files a model file came from.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.verification.strength.check_inputs import WorkspaceIndex, named_files

if TYPE_CHECKING:
    from vera_env.sandbox import ExecResult

__all__ = ["CommandLog", "LoggedCommand", "Tree", "walk_tree"]

_MAX_DIFF_ENTRIES = 200_000   # above this a walk keeps only its digest
_MAX_CHANGED_KEPT = 256
_MAX_MENTIONS = 64
_MAX_DEPTH = 256
_MAX_PROVENANCE_STEPS = 512
_MIN_ENTRY_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Tree:
    """One stat walk of a workspace.

    Attributes:
        digest: Hash of every entry's path and signature.
        entries: Path -> signature, or None when the tree was too large to keep.
        complete: Every directory could be read.
        bytes: Disk the entries take (each inode once, at least a block each),
            excluding the inodes the walk was told to skip.
    """

    digest: bytes
    entries: dict[str, tuple[int, ...]] | None
    complete: bool
    bytes: int


@dataclass(frozen=True, slots=True)
class LoggedCommand:
    """A command that changed the workspace.

    Attributes:
        command: Its shell text, replayed verbatim.
        status: How the real run ended (``ExecResult.status``); a replay that ends
            otherwise did not reproduce it.
        duration_s: The real run's wall time.
        changed: Paths it added, changed or removed (at most 256 kept).
        changed_unknown: The walk could not list what changed (too many entries,
            or an unreadable directory): it may have written anything.
        mentions: Workspace names its text mentions, globs, or runs as a script that
            names them (for provenance; also names the command removed).
    """

    command: str
    status: str
    duration_s: float
    changed: frozenset[str]
    changed_unknown: bool
    mentions: tuple[str, ...]


class CommandLog:
    """The commands of one episode that changed its workspace, in order.

    Args:
        root: The workspace directory on the host (walked after every command).
        sources: The task's file names (always looked for in a command's text).
    """

    def __init__(self, root: Path, sources: Sequence[str] = ()) -> None:
        self._root = root
        self._sources = frozenset(sources)
        self._tree = walk_tree(root)
        self.entries: list[LoggedCommand] = []
        self.unchanged = 0

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def root(self) -> Path:
        """The real workspace the log was recorded in."""
        return self._root

    @property
    def derivation_s(self) -> float:
        """Wall time the logged commands took when the model ran them."""
        return sum(e.duration_s for e in self.entries)

    def record(self, command: str, result: ExecResult) -> LoggedCommand | None:
        """Walk the workspace after ``command`` ran; log it if anything changed.

        Returns:
            The logged entry, or None when the command changed nothing.
        """
        before, after = self._tree, walk_tree(self._root)
        self._tree = after
        if after.digest == before.digest and after.complete:
            self.unchanged += 1
            return None
        known = before.entries is not None and after.entries is not None and after.complete
        changed: set[str] = set()
        names: set[str] = set()
        if known:
            assert before.entries is not None and after.entries is not None
            names = before.entries.keys() | after.entries.keys()
            changed = {p for p in names if before.entries.get(p) != after.entries.get(p)}
        entry = LoggedCommand(
            command=command, status=result.status, duration_s=result.duration_s,
            changed=frozenset(sorted(changed)[:_MAX_CHANGED_KEPT]),
            changed_unknown=not known or len(changed) > _MAX_CHANGED_KEPT,
            mentions=tuple(named_files(command, WorkspaceIndex(sorted(names | self._sources)),
                                       self._root,
                                       limit=_MAX_MENTIONS, existing=False)))
        self.entries.append(entry)
        return entry

    def sources_behind(self, files: Sequence[str], sources: Sequence[str]) -> list[str]:
        """The task files that ``files`` came from, nearest first.

        A named task file is its own source; a model file comes from the task files
        (and other model files) named by the commands that wrote it, latest first.
        """
        wanted = set(sources)
        found: dict[str, None] = {}
        seen = set(files)
        queue = deque(files)
        steps = 0
        while queue and steps < _MAX_PROVENANCE_STEPS:
            name = queue.popleft()
            steps += 1
            if name in wanted:
                found.setdefault(name)
            for entry in reversed(self.entries):
                if name in entry.changed or entry.changed_unknown:
                    for other in entry.mentions:
                        if other not in seen:
                            seen.add(other)
                            queue.append(other)
        return list(found)


def walk_tree(root: Path, skip_inodes: frozenset[tuple[int, int]] = frozenset()) -> Tree:
    """Stat every entry under ``root`` (never following links).

    Args:
        root: The directory to walk.
        skip_inodes: (device, inode) pairs whose disk does not count in ``bytes``.
    """
    digest = hashlib.blake2b(digest_size=16)
    entries: dict[str, tuple[int, ...]] | None = {}
    counted: set[tuple[int, int]] = set()
    total = 0
    complete = True
    for rel, st in _entries(root):
        if rel is None:
            complete = False
            continue
        is_dir = stat.S_ISDIR(st.st_mode)
        sig = ((st.st_mode, st.st_ino) if is_dir else
               (st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        digest.update(f"{rel}\0{sig}\n".encode("utf-8", "surrogateescape"))
        if entries is not None:
            entries[rel] = sig
            if len(entries) > _MAX_DIFF_ENTRIES:
                entries = None
        key = (st.st_dev, st.st_ino)
        if key not in skip_inodes and key not in counted:
            counted.add(key)
            total += max(st.st_blocks * 512, _MIN_ENTRY_BYTES)
    return Tree(digest.digest(), entries, complete, total)


def _entries(root: Path) -> Iterator[tuple[str | None, os.stat_result]]:
    """(relative path, lstat) of every entry, directories in sorted order; a
    directory that cannot be read yields ``(None, its stat)`` and is skipped."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        stack: list[tuple[str, int]] = [("", 0)]
        while stack:
            prefix, depth = stack.pop()
            try:
                fd = os.open(prefix or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                             dir_fd=top)
            except OSError:
                yield None, os.stat_result((0,) * 10)
                continue
            try:
                with os.scandir(fd) as listing:
                    found = sorted(listing, key=lambda e: e.name)
                for entry in found:
                    st = entry.stat(follow_symlinks=False)
                    rel = prefix + entry.name
                    yield rel, st
                    if stat.S_ISDIR(st.st_mode):
                        if depth + 1 >= _MAX_DEPTH:
                            yield None, st
                        else:
                            stack.append((rel + "/", depth + 1))
            except OSError:
                yield None, os.stat_result((0,) * 10)
            finally:
                os.close(fd)
    finally:
        os.close(top)
