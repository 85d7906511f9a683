"""A verdict store shared by the episodes of one process: a pure check is run twice, not
once per episode.

In GRPO every episode of a group plays the same task and the policy writes the same
checks over the same files; strength then runs each check on the same controls and
mutants in every episode (``benchmarks/strength_share.py`` measured the share of strength
runs whose check, variant and inputs were already decided). A check whose verdict is a
function of what it can read has one verdict per variant, whoever asks, so this store
keeps it. **A verdict is served only when all of these hold:**

* **The same question.** The key is the check's command text; the variant's *view*,
  a digest of everything the check can read under ``/work`` (every entry's path, type,
  mode and content, or link target: the task files as the variant edited them, and the
  episode's files, which for a shadow are what the replay of the episode's commands
  wrote); and the *setting*, the sandbox backend and its limits. Times and inodes are
  left out of the view on purpose: a check that reads them is not shared (next rule).
* **A pure command.** ``shareable`` refuses a command whose text names a source of
  entropy or of episode-specific metadata (``$RANDOM``, ``/dev/urandom``, ``date``,
  ``stat``, ``/proc``, PIDs, ``ls -l``, ``find -newer``, compressors that stamp times,
  ``sort -R``...), or that runs a file of the workspace (``bash x.sh``, ``./x``,
  ``awk -f``), whose text the screen cannot see. Such a check is run afresh every time.
* **Seen deterministic.** A verdict is served only after two runs of the same key agreed
  (from any episodes, confirmations included), and never for a command any of whose
  keys ever got two different verdicts (it is *poisoned*: for a coin, two runs on
  each of ~14 variants disagree somewhere with odds above 0.9999). The screen is a
  heuristic; this is what catches the entropy it misses, before serving, not after.
* **The luck bound's coins are re-tossed.** Confirmation runs (``luck``) and the
  control each confirmation re-runs are never served: they only add observations. So a
  check driven by entropy meets as many fresh tosses as before, and the clock check that
  the late control stops is stopped still.
* **The same budget.** A served verdict charges the node's budget what its run cost
  when it was decided (``budget.run_cost``), and is served only when that run took under
  half of the timeout it would get now: the store lets an episode decide nothing it
  would not have decided by running the check. Only clean runs are kept (status ``ok``,
  not timed out); a timeout, a memory kill or a fault is never stored.

The store changes no verdict of a deterministic check and no reward (tests: the same
episode earns the same with it on and off; the red-team scenarios). It holds at most
``max_entries`` keys (least recently used dropped; a key is ~200 bytes plus its command)
and is per process: the threads of one runner (``EnvPool``) share it; Ray workers each
keep their own.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from vera_env.sandbox.disk import walk
from vera_env.sandbox.result import STATUS_OK, ExecResult

__all__ = ["Decided", "Tree", "VerdictKey", "VerdictStore", "file_part", "process_store",
           "read_tree", "shareable"]

MAX_ENTRIES = 50_000
"""Keys the process store keeps (and as many poisoned commands)."""
MAX_VIEW_BYTES = 64 << 20
"""A tree with more content than this is not viewed (its checks run afresh)."""
MAX_VIEW_ENTRIES = 20_000
_CHUNK = 1 << 20

_IMPURE = re.compile(
    r"\$\{?(RANDOM|SRANDOM|SECONDS|EPOCH\w*|BASHPID|PPID|HOSTNAME|\$|!)"
    r"|/dev/|/proc|/sys\b|/tmp|/etc/"
    r"|\b(date|datetime|time|times|clock|now|uptime|sleep|timeout|systime|strftime"
    r"|stat|lstat|fstat|statx|getmtime|getctime|getatime|mtime|ctime|atime|st_\w+"
    r"|inode|ino|rand|random|srand|urandom|uuid|uuidgen|secrets|shuf|mktemp|tempfile"
    r"|pid|getpid|getppid|hostname|printenv|env|ps|top|du|df|who|id|tty"
    r"|perf_counter|monotonic|hash|tar|zip|cpio|gzip|bgzip|pigz|bzip2|xz|zstd|lz4)\b"
    r"|\bls\s+-|\bfind\b[^|;&\n]*-(newer|[acm]min|[acm]time|inum|printf|fprintf|ls|used"
    r"|samefile)"
    r"|\s-(nt|ot|ef)\s|\bsort\b[^|;&\n]*\s-[a-zA-Z]*R"
    # runs a file whose text this screen cannot see
    r"|(^|[\s;&|(`])(\./|\.\s|source\s)|\.(sh|py|pl|r|R|awk|rb|js|bash)\b"
    r"|\bawk\b[^|;&\n]*\s-f\s",
    re.IGNORECASE)


def shareable(command: str) -> bool:
    """Whether ``command``'s text is free of the sources of entropy and metadata the
    module docstring lists (a heuristic; the agreement rule backs it).

    Example:
        >>> shareable("awk -F, 'NR>1 && $3>5' data.csv | wc -l | grep -qx 4 && echo True")
        True
        >>> shareable("[ $((RANDOM % 2)) = 0 ] && echo True || echo False")
        False
        >>> shareable("head -c1 /dev/urandom | od -An -tu1")
        False
    """
    return _IMPURE.search(command) is None


@dataclass(frozen=True, slots=True)
class VerdictKey:
    """What a verdict is a function of, for a pure check (the module docstring).

    Attributes:
        command: The check's text.
        view: Digest of what it can read under ``/work`` on the variant.
        setting: The sandbox backend and limits.
    """

    command: str
    view: str
    setting: str


@dataclass(frozen=True, slots=True)
class Decided:
    """A verdict the store serves, and what its run cost (charged again)."""

    verdict: bool | None
    duration_s: float
    cpu_s: float | None
    cpu_wait_s: float | None

    def as_result(self) -> ExecResult:
        """The run, as the budget charges it (no output: the verdict is decided)."""
        return ExecResult(stdout="", stderr="", exit_code=0, timed_out=False,
                          duration_s=self.duration_s, cpu_s=self.cpu_s,
                          cpu_wait_s=self.cpu_wait_s)


@dataclass(slots=True)
class _Entry:
    decided: Decided
    runs: int


@dataclass(slots=True)
class StoreStats:
    """Counts since the store was made or cleared."""

    served: int = 0
    missed: int = 0
    observed: int = 0
    poisoned: int = 0


class VerdictStore:
    """Verdicts of pure checks by ``VerdictKey``, bounded (least recently used).

    Args:
        max_entries: Keys kept (and poisoned commands), at least 1.
        min_runs: Agreeing runs of a key before it is served, at least 2.

    Raises:
        ValueError: ``max_entries < 1`` or ``min_runs < 2``.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, *, min_runs: int = 2) -> None:
        if max_entries < 1 or min_runs < 2:
            raise ValueError(f"need max_entries >= 1 and min_runs >= 2, got "
                             f"{max_entries!r} and {min_runs!r}")
        self._max, self._min_runs = max_entries, min_runs
        self._entries: OrderedDict[VerdictKey, _Entry] = OrderedDict()
        self._poisoned: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._flying: dict[VerdictKey, int] = {}
        self.stats = StoreStats()
        self.trace: Callable[[VerdictKey, str], None] | None = None
        """Called with each key and ``served``/``run``/``confirm`` (benchmarks)."""

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def claim(self, key: VerdictKey, timeout_s: float) -> Decided | None:
        """The verdict of ``key`` if the module docstring's rules allow serving it, else
        None, and the caller runs it and then calls ``release(key)``.

        Runs of ``key`` already in flight that would make it servable (a GRPO group asks
        the same question at once) are waited for, at most ``timeout_s``: then served."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                entry = self._entries.get(key)
                poisoned = (key.command, key.setting) in self._poisoned
                runs = 0 if entry is None or poisoned else entry.runs
                if (entry is not None and not poisoned and runs >= self._min_runs
                        and 2 * entry.decided.duration_s < timeout_s):
                    self._entries.move_to_end(key)
                    self.stats.served += 1
                    decided: Decided | None = entry.decided
                    break
                flying = self._flying.get(key, 0)
                left = deadline - time.monotonic()
                if poisoned or runs + flying < self._min_runs or left <= 0:
                    self._flying[key] = flying + 1
                    self.stats.missed += 1
                    decided = None
                    break
                self._cond.wait(left)
        if self.trace is not None:
            self.trace(key, "run" if decided is None else "served")
        return decided

    def release(self, key: VerdictKey) -> None:
        """A run ``claim`` handed out has ended (observed or not)."""
        with self._cond:
            flying = self._flying.get(key, 0) - 1
            if flying > 0:
                self._flying[key] = flying
            else:
                self._flying.pop(key, None)
            self._cond.notify_all()

    def observe(self, key: VerdictKey, result: ExecResult, verdict: bool | None, *,
                confirmation: bool = False) -> None:
        """Record a fresh run of ``key``: a clean one counts toward serving it, and a
        verdict unlike the one kept poisons its command."""
        if confirmation and self.trace is not None:
            self.trace(key, "confirm")
        if result.status != STATUS_OK or result.timed_out:
            return
        with self._lock:
            self.stats.observed += 1
            entry = self._entries.get(key)
            if entry is None:
                self._entries[key] = _Entry(Decided(verdict, result.duration_s,
                                                    result.cpu_s, result.cpu_wait_s), 1)
                while len(self._entries) > self._max:
                    self._entries.popitem(last=False)
                return
            self._entries.move_to_end(key)
            if entry.decided.verdict != verdict:
                self._poison((key.command, key.setting))
            else:
                entry.runs += 1

    def _poison(self, what: tuple[str, str]) -> None:
        if what not in self._poisoned:
            self.stats.poisoned += 1
        self._poisoned[what] = None
        self._poisoned.move_to_end(what)
        while len(self._poisoned) > self._max:
            self._poisoned.popitem(last=False)

    def clear(self) -> None:
        """Forget every verdict, poisoned command and count."""
        with self._lock:
            self._entries.clear()
            self._poisoned.clear()
            self.stats = StoreStats()


_PROCESS_STORE = VerdictStore()


def process_store() -> VerdictStore:
    """The store every episode of this process shares (``StrengthConfig.share_verdicts``)."""
    return _PROCESS_STORE


@dataclass(frozen=True, slots=True)
class Tree:
    """What a check can read under a root: each entry's path with its type, mode and
    content digest (a link's target), in name order (``read_tree``)."""

    entries: tuple[tuple[str, str], ...]

    def view(self, swap: Mapping[str, str] | None = None) -> str | None:
        """The tree's digest with ``swap``'s entries (``file_part``) in place of their
        namesakes (a frozen variant's overlay); None if a name to swap is not there."""
        swap = dict(swap or {})
        digest = hashlib.blake2b(digest_size=20)
        for rel, part in self.entries:
            part = swap.pop(rel, part)
            digest.update(f"{rel}\0{part}\n".encode("utf-8", "surrogateescape"))
        return None if swap else digest.hexdigest()


def read_tree(root: Path) -> Tree | None:
    """``root``'s ``Tree``; None when it cannot be seen whole, holds a fifo or a socket
    (either could answer differently on each read), or is too large to view (more than
    ``MAX_VIEW_ENTRIES`` entries or ``MAX_VIEW_BYTES`` of content): its checks are then
    run afresh."""
    entries: list[tuple[str, str]] = []
    size = 0
    for rel, st in walk(root, sort=True):
        if st is None or len(entries) >= MAX_VIEW_ENTRIES:
            return None
        size += st.st_size if stat.S_ISREG(st.st_mode) else 0
        part = _part(root / rel, st) if size <= MAX_VIEW_BYTES else None
        if part is None:
            return None
        entries.append((rel, part))
    return Tree(tuple(entries))


def file_part(path: Path) -> str | None:
    """One file's entry in a ``Tree`` (type, mode, content digest); None: unreadable."""
    try:
        return _part(path, path.stat())
    except OSError:
        return None


def _part(path: Path, st: os.stat_result) -> str | None:
    kind, mode = stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode)
    try:
        if stat.S_ISDIR(st.st_mode):
            body = ""
        elif stat.S_ISLNK(st.st_mode):
            body = "->" + str(path.readlink())
        elif stat.S_ISREG(st.st_mode):
            h = hashlib.blake2b(digest_size=20)
            with path.open("rb") as fh:
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
            body = h.hexdigest()
        else:
            return None
    except OSError:
        return None
    return f"{kind:o}\0{mode:o}\0{body}"


class Views:
    """One episode's trees, read once: the real workspace's per node, a shadow's per
    replay length (a check cannot write, so nothing else changes them); and the parts
    of variant files (written once, read-only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._trees: dict[Path, tuple[object, Tree | None]] = {}
        self._parts: dict[Path, str | None] = {}

    def tree(self, root: Path, stamp: object) -> Tree | None:
        """``root``'s tree as of ``stamp`` (read again when the stamp changes)."""
        with self._lock:
            held = self._trees.get(root)
            if held is not None and held[0] == stamp:
                return held[1]
        tree = read_tree(root)
        with self._lock:
            self._trees[root] = (stamp, tree)
        return tree

    def part(self, path: Path) -> str | None:
        """``file_part`` of a file that does not change."""
        with self._lock:
            if path in self._parts:
                return self._parts[path]
        part = file_part(path)
        with self._lock:
            self._parts[path] = part
        return part
