"""Which workspace files a check (or a command) names, found in time linear in the workspace.

Strength testing (``vera_env.verification.strength``) uses this twice: a check that
names no workspace file at all is not worth replaying the episode for (``echo True``,
a name assembled at run time: the harness does not pay for what it cannot see), and
the task files a check depends on — directly, or through the model's files and the
commands that wrote them — are mutated first. What counts as named:

* a workspace path (or base name) that occurs in the text as a word —
  ``values.txt``, ``/work/values.txt``, ``open('values.txt')`` — and not as the prefix
  of a longer name (``seqs.fa`` inside ``seqs.fa.gz``);
* the node's artifact, when it is a workspace file;
* the files a glob word matches (``*.gz``);
* for a script the check runs (a ``.py``/``.sh``/``.awk``/... file, or one starting
  with ``#!``), the script and the files *its* text names, three levels deep.

Issue 11 measured the old discovery at 64 s for 30,000 files and one globbing check
(every glob match was appended after a scan of a list). Here the listing is indexed
once (``WorkspaceIndex``: names and base names in hash maps), the text is cut into
words once, and each word costs one lookup; only names that cannot be a word
(spaces, quotes) are searched for as substrings. Globs are compiled once and stop at
``limit`` matches. Links are never followed and only regular files are read: the
harness may run as root, and a link must never lead it to read a host file on the
model's behalf.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import stat
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["CODE_SUFFIXES", "WorkspaceIndex", "mentioned", "named_files", "read_regular"]

CODE_SUFFIXES: frozenset[str] = frozenset(
    {".py", ".sh", ".bash", ".awk", ".sed", ".pl", ".r", ".rb", ".js", ".jl", ".lua"})
_SCRIPT_SCAN_BYTES = 1 << 20
_SCRIPT_DEPTH = 3
_MAX_GLOB_WORDS = 16
_GLOB_CHARS = re.compile(r"[*?\[]")
_WORD = re.compile(r"[\w./+@%~-]+")
_PLAIN_NAME = re.compile(r"[\w./+@%~-]+")


class WorkspaceIndex:
    """A workspace listing indexed for lookups by path and by base name.

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


def mentioned(text: str, index: WorkspaceIndex, limit: int | None = None) -> list[str]:
    """The indexed names ``text`` mentions as words, in order of first mention
    (at most ``limit`` of them)."""
    first: dict[str, int] = {}
    for match in _WORD.finditer(text):
        word = match.group()
        for candidate in (word, word.rstrip(".")):
            for name in index.lookup(candidate):
                first.setdefault(name, match.start())
        if limit is not None and len(first) >= limit:
            break
    for name in index.odd_names():  # a quoted name with spaces: a plain substring search
        for form in (name, os.path.basename(name)):
            at = text.find(form)
            if at >= 0:
                first.setdefault(name, at)
                break
    ordered = sorted(first, key=first.__getitem__)
    return ordered if limit is None else ordered[:limit]


def named_files(command: str, listing: Sequence[str] | WorkspaceIndex, root: Path, *,
                artifact: str = "", limit: int | None = None,
                existing: bool = True) -> list[str]:
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

    Returns:
        Links are never followed; for a script the text runs, the script and then the
        files it names.
    """
    index = listing if isinstance(listing, WorkspaceIndex) else WorkspaceIndex(listing)
    found = dict.fromkeys(mentioned(command, index, limit))
    rel = _relative(artifact)
    if rel in index:
        found.setdefault(rel)
    for name in _globbed(command, index, limit):
        found.setdefault(name)
    out: dict[str, None] = {}
    queue = deque((name, 0) for name in found)
    while queue and (limit is None or len(out) < limit):
        name, depth = queue.popleft()
        if name in out:
            continue
        head = read_regular(root, name, 2)
        if head is None and existing:
            continue  # not a regular file reached without a link
        out[name] = None
        if head is not None and depth < _SCRIPT_DEPTH and _is_script(name, head):
            text = (read_regular(root, name, _SCRIPT_SCAN_BYTES) or b"").decode(
                "utf-8", errors="replace")
            queue.extend((n, depth + 1) for n in mentioned(text, index, limit)
                         if n not in out)
    return list(out)


def _relative(name: str) -> str:
    name = name.strip().strip("'\"")
    for prefix in ("/work/", "./"):
        while name.startswith(prefix):
            name = name[len(prefix):]
    return os.path.normpath(name) if name and name != "/work" else ""


def _globbed(command: str, index: WorkspaceIndex, limit: int | None) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    patterns = [_relative(w) for w in words if _GLOB_CHARS.search(w)][:_MAX_GLOB_WORDS]
    if not patterns:
        return []
    matchers = [re.compile(fnmatch.translate(p)).match for p in patterns if p]
    out: list[str] = []
    for name in index.names:
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
