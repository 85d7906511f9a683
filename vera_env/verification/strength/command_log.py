"""The episode's derivation: which commands wrote files, so strength can replay them.

Strength testing asks whether a check's verdict is a function of the task's data
through the model's own derivation. It answers by replaying that derivation on
variants of the data (``shadows``), so it needs the commands that changed the
workspace, in order. A hack seen in training is why: ``echo 42 > a.txt`` and a check pinning
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

``record`` runs after every command, outside any node's deadline, so its scan of the
command's text (and of the scripts it runs) has a budget of its own
(``scan_budget_s``, a few seconds: a scan that is not linear took 70 s for one step
with 20,000 names containing a space and four 1 MB scripts). A
scan that runs out fails closed *towards more provenance*: the command is logged as
mentioning every task file (``LoggedCommand.scanned`` False). That is safe for
integrity — varying a task file a command did not read replays to the same files, so
no check earns by it — and a model gains nothing by exhausting the budget, which
only makes strength vary more files (within the node's deadline); marking the
command's outputs as earning nothing instead would also cost honest work whose
workspace happens to hold many odd names.
"""

from __future__ import annotations

import hashlib
import stat
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.sandbox.disk import walk
from vera_env.verification.strength.budget import run_cost
from vera_env.verification.strength.check_inputs import (
    ScanClock,
    WorkspaceIndex,
    named_files,
)
from vera_env.verification.strength.outcome import StrengthDeadline, TimeLeft

if TYPE_CHECKING:
    from vera_env.sandbox import ExecResult

__all__ = ["CommandLog", "LoggedCommand", "Tree", "walk_tree"]

_MAX_DIFF_ENTRIES = 200_000   # above this a walk keeps only its digest
_MAX_CHANGED_KEPT = 256
_MAX_MENTIONS = 64
_MAX_PROVENANCE_STEPS = 512
_MIN_ENTRY_BYTES = 4096
SCAN_BUDGET_S = 3.0
"""Default seconds ``CommandLog.record`` may spend on one command's names."""


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
        cpu_s: The real run's CPU time (``ExecResult.cpu_s``; None: not counted).
        cpu_wait_s: Its wait for a CPU (``ExecResult.cpu_wait_s``; None: not counted).
        changed: Paths it added, changed or removed (at most 256 kept).
        changed_unknown: The walk could not list what changed (too many entries,
            or an unreadable directory): it may have written anything.
        mentions: Workspace names its text mentions, globs, or runs as a script that
            names them (for provenance; also names the command removed).
        scanned: The scan for those names finished within its budget. False: it ran
            out, and ``mentions`` also holds every task file (see the module docstring).
    """

    command: str
    status: str
    duration_s: float
    changed: frozenset[str]
    changed_unknown: bool
    mentions: tuple[str, ...]
    scanned: bool = True
    cpu_s: float | None = None
    cpu_wait_s: float | None = None


class CommandLog:
    """The commands of one episode that changed its workspace, in order.

    Args:
        root: The workspace directory on the host (walked after every command).
        sources: The task's file names (always looked for in a command's text).
        scan_budget_s: Seconds ``record`` may spend finding the names one command
            mentions (see the module docstring).
    """

    def __init__(self, root: Path, sources: Sequence[str] = (), *,
                 scan_budget_s: float = SCAN_BUDGET_S) -> None:
        if not scan_budget_s > 0:
            raise ValueError(f"scan_budget_s must be > 0 seconds, got {scan_budget_s!r}")
        self._root = root
        self._sources = frozenset(sources)
        self._scan_budget_s = scan_budget_s
        self._tree = walk_tree(root)
        self._index: WorkspaceIndex | None = None
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

    @property
    def derivation_work_s(self) -> float:
        """The logged commands' own time when the model ran them (``budget.run_cost``):
        unlike ``derivation_s``, not raised by another process's load."""
        return sum(run_cost(e.duration_s, e.cpu_s, e.cpu_wait_s) for e in self.entries)

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
        mentions, scanned = self._mentions(command, sorted(names | self._sources))
        entry = LoggedCommand(
            command=command, status=result.status, duration_s=result.duration_s,
            changed=frozenset(sorted(changed)[:_MAX_CHANGED_KEPT]),
            changed_unknown=not known or len(changed) > _MAX_CHANGED_KEPT,
            mentions=mentions, scanned=scanned, cpu_s=result.cpu_s,
            cpu_wait_s=result.cpu_wait_s)
        self.entries.append(entry)
        return entry

    def _mentions(self, command: str, names: list[str]) -> tuple[tuple[str, ...], bool]:
        """The names ``command`` mentions, and whether the scan finished in budget
        (when not: every task file is mentioned too, sorted, after what was found)."""
        ends = time.monotonic() + self._scan_budget_s
        if self._index is None or self._index.names != names:
            self._index = WorkspaceIndex(names)  # its automaton is kept while names stay
        try:
            found = named_files(command, self._index, self._root, limit=_MAX_MENTIONS,
                                existing=False, time_left=lambda: ends - time.monotonic())
        except StrengthDeadline:
            return tuple(sorted(self._sources)), False
        return tuple(found), True

    def sources_behind(self, files: Sequence[str], sources: Sequence[str], *,
                       time_left: TimeLeft | None = None) -> list[str]:
        """The task files that ``files`` came from, nearest first.

        A named task file is its own source; a model file comes from the task files
        (and other model files) named by the commands that wrote it, latest first.
        Each path's writers are looked up in an index, so a step costs what it finds,
        not the length of the log.

        Raises:
            StrengthDeadline: ``time_left`` reached zero first.
        """
        clock = ScanClock(time_left, "tracing where the model's files came from")
        writers: dict[str, list[int]] = {}
        unknown: list[int] = []
        for i, entry in enumerate(self.entries):
            clock.tick()
            if entry.changed_unknown:
                unknown.append(i)
            for path in entry.changed:
                writers.setdefault(path, []).append(i)
        wanted = set(sources)
        found: dict[str, None] = {}
        seen = set(files)
        queue = deque(files)
        steps = 0
        while queue and steps < _MAX_PROVENANCE_STEPS:
            name = queue.popleft()
            clock.check()
            if name in wanted:
                found.setdefault(name)
            # A command that may have written anything wrote every name; its mentions
            # are all seen after the first step, so later steps need not look again.
            nearest = sorted({*writers.get(name, ()), *(unknown if steps == 0 else ())},
                             reverse=True)
            steps += 1
            for i in nearest:
                for other in self.entries[i].mentions:
                    if other not in seen:
                        seen.add(other)
                        queue.append(other)
        return list(found)


def walk_tree(root: Path, skip_inodes: frozenset[tuple[int, int]] = frozenset()) -> Tree:
    """Stat every entry under ``root`` (never following links), in name order.

    Walked by ``vera_env.sandbox.disk.walk``: a directory it cannot see (unreadable,
    or deeper than ``vera_env.sandbox.disk.MAX_DEPTH`` levels) makes the tree
    incomplete, which ``CommandLog.record`` counts as a change.

    Args:
        root: The directory to walk.
        skip_inodes: (device, inode) pairs whose disk does not count in ``bytes``.
    """
    digest = hashlib.blake2b(digest_size=16)
    entries: dict[str, tuple[int, ...]] | None = {}
    counted: set[tuple[int, int]] = set()
    total = 0
    complete = True
    for rel, st in walk(root, sort=True):
        if st is None:
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
