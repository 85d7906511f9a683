"""Which workspace files a check (or a command) names, found in time linear in the input.

Strength testing (``vera_env.verification.strength``) uses this twice: a check that
names no workspace file at all is not worth replaying the episode for (``echo True``,
a name assembled at run time: the harness does not pay for what it cannot see), and
the task files a check depends on — directly, or through the model's files and the
commands that wrote them — are mutated first. What counts as named:

* a workspace path (or base name) that occurs in the text as a word —
  ``values.txt``, ``/work/values.txt``, ``open('values.txt')`` — and not as the prefix
  of a longer name (``seqs.fa`` inside ``seqs.fa.gz``);
* a name that cannot be one word (a space, a quote: ``'my file.tsv'``), or its base
  name, anywhere in the text;
* the node's artifact, when it is a workspace file;
* the files a glob word matches (``*.gz``);
* for a script the check runs (a ``.py``/``.sh``/``.awk``/... file, or one starting
  with ``#!``), the script and the files *its* text names, three levels deep.

Cost. The listing is indexed once (``WorkspaceIndex``: names and base names in hash
maps) and each word of the text costs one lookup: a discovery that scanned the listing
took 64 s for 30,000 files and one globbing check. Names that cannot be a word (a
space inside) are found by one Aho-Corasick automaton over all of them
(``pyahocorasick``), built once per index: one pass over the text whatever the number
of names. Searched for one at a time, a pass over the text per name, 20,000 names
containing a space and one command naming four 1 MB scripts made one step take 70 s.
What remains is linear in the text, the listing and the matches reported: a word is
looked up once however often it recurs, a base name shared by thousands of paths is
expanded once, ``./`` and ``/work/`` prefixes are cut by one
regular expression (a loop of ``startswith`` was quadratic in a word of ``./././``).
The automaton reports every occurrence of every odd name, so a listing built so that
names nest as suffixes of one another (``' a'``, ``'  a'``, ...) costs the text times
that depth; that, like every scan, is bounded by the caller's deadline.

Deadline. Every scan takes ``time_left`` (seconds left to the step's deadline) and
looks at it every few thousand words, matches or names, and between scripts; when it
reaches zero the scan raises ``StrengthDeadline``: what it could not finish decides
nothing (the caller fails closed).

Links are never followed and only regular files are read: the harness may run as
root, and a link must never lead it to read a host file on the model's behalf.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import stat
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

import ahocorasick  # type: ignore[import-not-found]  # no stubs: a C extension

from vera_env.verification.strength.outcome import StrengthDeadline, TimeLeft

__all__ = ["CODE_SUFFIXES", "ScanClock", "WorkspaceIndex", "mentioned",
           "named_files", "read_regular"]

CODE_SUFFIXES: frozenset[str] = frozenset(
    {".py", ".sh", ".bash", ".awk", ".sed", ".pl", ".r", ".rb", ".js", ".jl", ".lua"})
_SCRIPT_SCAN_BYTES = 1 << 20
_SCRIPT_DEPTH = 3
_MAX_GLOB_WORDS = 16
_MAX_GLOB_CHARS = 4096  # PATH_MAX: a longer glob word is not a path pattern
_CLOCK_EVERY = 4096     # words, matches or names between two looks at the clock
_GLOB_CHARS = re.compile(r"[*?\[]")
_STARS = re.compile(r"\*+")
_WORD = re.compile(r"[\w./+@%~-]+")
_PLAIN_NAME = re.compile(r"[\w./+@%~-]+")
_PREFIXES = re.compile(r"\A(?:/work/)*(?:\./)*")  # one pass: a loop was quadratic


class ScanClock:
    """Looks at the step's deadline every ``_CLOCK_EVERY`` ticks of a scan.

    Args:
        time_left: Seconds left to the deadline; None: the scan is unbounded (tests,
            tools).
        what: What is being scanned, for the exception's message.
    """

    __slots__ = ("_count", "_time_left", "_what")

    def __init__(self, time_left: TimeLeft | None, what: str) -> None:
        self._time_left = time_left
        self._what = what
        self._count = 0

    def tick(self) -> None:
        """Count one unit of work; look at the clock every ``_CLOCK_EVERY``.

        Raises:
            StrengthDeadline: The deadline has passed.
        """
        self._count += 1
        if self._count >= _CLOCK_EVERY:
            self._count = 0
            self.check()

    def check(self) -> None:
        """Look at the clock now.

        Raises:
            StrengthDeadline: The deadline has passed.
        """
        if self._time_left is not None and self._time_left() <= 0:
            raise StrengthDeadline(f"the step's deadline passed while {self._what}")


class WorkspaceIndex:
    """A workspace listing indexed for lookups by path, by base name, and by substring.

    Args:
        listing: Relative paths of the workspace's files (``Workspace.listing()``).
    """

    def __init__(self, listing: Iterable[str]) -> None:
        self.names: list[str] = list(listing)
        self._set = set(self.names)
        self._by_base: dict[str, list[str]] = {}
        self._odd: list[str] = []  # names that cannot be one word of a command
        for name in self.names:
            self._by_base.setdefault(os.path.basename(name), []).append(name)
            if not _PLAIN_NAME.fullmatch(name):
                self._odd.append(name)
        self._lock = threading.Lock()
        self._automaton: ahocorasick.Automaton | None = None
        self._lengths: list[int] = []
        self._odd_forms: list[tuple[int, int]] = []  # odd name -> (its pattern, its base's)

    def __contains__(self, name: object) -> bool:
        return name in self._set

    def lookup(self, word: str) -> list[str]:
        """The names ``word`` denotes: itself as a path, else every name it is the
        base name of."""
        rel = _relative(word)
        if rel in self._set:
            return [rel]
        base = rel.rsplit("/", 1)[-1]
        return self._by_base.get(base, []) if base else []

    def odd_names(self) -> list[str]:
        """Names with characters a shell word cannot hold unquoted."""
        return self._odd

    def lookup_once(self, word: str, expanded: set[str]) -> list[str]:
        """``lookup``, except that a base name in ``expanded`` was expanded before
        (its names are already found, earlier) and is not expanded again."""
        rel = _relative(word)
        if rel in self._set:
            return [rel]
        base = rel.rsplit("/", 1)[-1]
        if not base or base in expanded:
            return []
        expanded.add(base)
        return self._by_base.get(base, [])

    def odd_mentions(self, text: str, clock: ScanClock) -> dict[str, int]:
        """Where each odd name first occurs in ``text`` (else its base name), in one
        pass of the automaton over the text; names in listing order.

        Raises:
            StrengthDeadline: ``clock`` ran out.
        """
        if not self._odd or not text:
            return {}
        automaton = self._odd_automaton()
        first: dict[int, int] = {}
        wanted = len(self._lengths)
        for end, pattern in automaton.iter(text):
            clock.tick()
            if pattern not in first:
                first[pattern] = end - self._lengths[pattern] + 1
                if len(first) == wanted:
                    break
        found: dict[str, int] = {}
        for name, (full, base) in zip(self._odd, self._odd_forms, strict=True):
            at = first.get(full, first.get(base) if base >= 0 else None)
            if at is not None:
                found[name] = at
        return found

    def _odd_automaton(self) -> ahocorasick.Automaton:
        """The automaton over every odd name and its base name, built on first use
        (an index is shared by the checks of a node, scanned from several threads)."""
        with self._lock:
            if self._automaton is None:
                automaton = ahocorasick.Automaton(ahocorasick.STORE_INTS)
                ids: dict[str, int] = {}
                forms: list[tuple[int, int]] = []
                for name in self._odd:
                    pair = [-1, -1]
                    for k, form in enumerate((name, os.path.basename(name))):
                        if form and form not in ids:
                            ids[form] = len(ids)
                            automaton.add_word(form, ids[form])
                        pair[k] = ids.get(form, -1)
                    forms.append((pair[0], pair[1]))
                automaton.make_automaton()
                self._lengths = [len(form) for form in ids]
                self._odd_forms = forms
                self._automaton = automaton
            return self._automaton


def mentioned(text: str, index: WorkspaceIndex, limit: int | None = None, *,
              time_left: TimeLeft | None = None) -> list[str]:
    """The indexed names ``text`` mentions, in order of first mention (at most
    ``limit`` of them).

    Raises:
        StrengthDeadline: ``time_left`` reached zero before the scan ended.
    """
    return _mentioned(text, index, limit, ScanClock(time_left, "scanning for file names"))


def _mentioned(text: str, index: WorkspaceIndex, limit: int | None,
               clock: ScanClock) -> list[str]:
    first: dict[str, int] = {}
    looked: set[str] = set()
    expanded: set[str] = set()
    for match in _WORD.finditer(text):
        clock.tick()
        word = match.group()
        if word in looked:
            continue  # its names already have an earlier first mention
        looked.add(word)
        for candidate in dict.fromkeys((word, word.rstrip("."))):
            for name in index.lookup_once(candidate, expanded):
                first.setdefault(name, match.start())
        if limit is not None and len(first) >= limit:
            break
    for name, at in index.odd_mentions(text, clock).items():
        first.setdefault(name, at)
    ordered = sorted(first, key=first.__getitem__)
    return ordered if limit is None else ordered[:limit]


def named_files(command: str, listing: Sequence[str] | WorkspaceIndex, root: Path, *,
                artifact: str = "", limit: int | None = None, existing: bool = True,
                time_left: TimeLeft | None = None) -> list[str]:
    """The workspace files a check (or a command) names, in order of first mention.

    Args:
        command: The shell text.
        listing: ``Workspace.listing()``, or a ``WorkspaceIndex`` of it.
        root: The workspace directory on the host (scripts are read from it).
        artifact: The node's artifact, added after the files named directly.
        limit: Stop after this many files (``cat *`` over ten thousand files must not
            read them all).
        existing: Keep only regular files present now (a check's inputs); False keeps
            indexed names that are gone (what a command read before removing it).
        time_left: Seconds left to the step's deadline (None: unbounded).

    Returns:
        Links are never followed; for a script the text runs, the script and then the
        files it names.

    Raises:
        StrengthDeadline: ``time_left`` reached zero before the scan ended.
    """
    clock = ScanClock(time_left, "finding the files a command names")
    index = listing if isinstance(listing, WorkspaceIndex) else WorkspaceIndex(listing)
    found = dict.fromkeys(_mentioned(command, index, limit, clock))
    rel = _relative(artifact)
    if rel in index:
        found.setdefault(rel)
    for name in _globbed(command, index, limit, clock):
        found.setdefault(name)
    out: dict[str, None] = {}
    queue = deque((name, 0) for name in found)
    while queue and (limit is None or len(out) < limit):
        name, depth = queue.popleft()
        if name in out:
            continue
        clock.check()
        head = read_regular(root, name, 2)
        if head is None and existing:
            continue  # not a regular file reached without a link
        out[name] = None
        if head is not None and depth < _SCRIPT_DEPTH and _is_script(name, head):
            text = (read_regular(root, name, _SCRIPT_SCAN_BYTES) or b"").decode(
                "utf-8", errors="replace")
            queue.extend((n, depth + 1) for n in _mentioned(text, index, limit, clock)
                         if n not in out)
    return list(out)


def _relative(name: str) -> str:
    name = name.strip().strip("'\"")
    name = _PREFIXES.sub("", name, count=1)
    return os.path.normpath(name) if name and name != "/work" else ""


def _globbed(command: str, index: WorkspaceIndex, limit: int | None,
             clock: ScanClock) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    patterns = [_STARS.sub("*", _relative(w)) for w in words
                if _GLOB_CHARS.search(w) and len(w) <= _MAX_GLOB_CHARS][:_MAX_GLOB_WORDS]
    matchers = [re.compile(fnmatch.translate(p)).match for p in patterns if p]
    if not matchers:
        return []
    out: list[str] = []
    for name in index.names:
        clock.tick()
        base = os.path.basename(name)
        if any(m(name) or m(base) for m in matchers):
            out.append(name)
            if limit is not None and len(out) >= limit:
                break
    return out


def _is_script(name: str, head: bytes) -> bool:
    return Path(name).suffix.lower() in CODE_SUFFIXES or head.startswith(b"#!")


def read_regular(root: Path, name: str, limit: int) -> bytes | None:
    """Read at most ``limit`` bytes of ``root/name`` if it is a regular file reached
    without any link (the harness may be root: a link must never lead it outside)."""
    base = os.path.realpath(root)
    path = os.path.join(base, name)
    if os.path.realpath(path) != path:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
