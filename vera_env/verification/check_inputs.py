"""Which workspace files a check reads as data, as far as its text shows.

Strength testing (``vera_env.verification.strength``) mutates the files a check reads; this module
decides which those are, from the check's command and the workspace listing alone:

* a workspace path (or base name) that occurs in the command as a word —
  ``values.txt``, ``/work/values.txt``, ``open('values.txt')`` — and not as the prefix
  of a longer name (``seqs.fa`` inside ``seqs.fa.gz``);
* the node's artifact, when it is a workspace file;
* the files a glob word matches (``*.gz``);
* for a script the check runs (a ``.py``/``.sh``/``.awk``/... file, or one starting
  with ``#!``), not the script — mutating code breaks it, which proves nothing — but
  the files *its* text names, three levels deep.

A file whose every line is a verdict word (``True``, ``pass``) is the model's verdict
written down, not data, and is left out. Links are never followed and only regular
files count: the harness may run as root, and a link must never lead it to read a host
file on the model's behalf.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import stat
from collections.abc import Sequence
from pathlib import Path

from vera_env.wire.protocol import verdict_from_output

__all__ = ["CODE_SUFFIXES", "named_files", "read_regular"]

CODE_SUFFIXES: frozenset[str] = frozenset(
    {".py", ".sh", ".bash", ".awk", ".sed", ".pl", ".r", ".rb", ".js", ".jl", ".lua"})
_SCRIPT_SCAN_BYTES = 1 << 20
_SCRIPT_DEPTH = 3
_GLOB_CHARS = re.compile(r"[*?\[]")
_VERDICT_FILE_BYTES = 4096


def named_files(command: str, listing: Sequence[str], root: Path, *,
                artifact: str = "", limit: int | None = None) -> list[str]:
    """The workspace files a check reads as data, in order of first mention.

    Args:
        command: The check's shell text.
        listing: ``Workspace.listing()``.
        root: The workspace directory on the host (scripts are read from it).
        artifact: The node's artifact, added after the files named directly.
        limit: Stop after this many data files (``cat *`` over ten thousand files
            must not read them all).

    Returns:
        Regular files only (links are never followed); scripts the check runs are
        replaced by the files they name.
    """
    found = _mentioned(command, listing)
    rel = _relative(artifact)
    if rel in listing and rel not in found:
        found.append(rel)
    for name in _globbed(command, listing):
        if name not in found:
            found.append(name)
    data: list[str] = []
    seen_scripts: set[str] = set()
    queue = [(name, 0) for name in found]
    while queue and (limit is None or len(data) < limit):
        name, depth = queue.pop(0)
        head = read_regular(root, name, _VERDICT_FILE_BYTES + 1)
        if head is None or _is_verdict_file(head):
            continue  # not a regular file, or the model's own verdict (module docstring)
        if _is_script(name, head):
            if name in seen_scripts or depth >= _SCRIPT_DEPTH:
                continue
            seen_scripts.add(name)
            raw = read_regular(root, name, _SCRIPT_SCAN_BYTES) or b""
            text = raw.decode("utf-8", errors="replace")
            queue += [(n, depth + 1) for n in _mentioned(text, listing) if n != name]
        elif name not in data:
            data.append(name)
    return data


def _relative(name: str) -> str:
    name = name.strip().strip("'\"")
    for prefix in ("/work/", "./"):
        while name.startswith(prefix):
            name = name[len(prefix):]
    return os.path.normpath(name) if name else ""


def _mentioned(text: str, listing: Sequence[str]) -> list[str]:
    hits: list[tuple[int, str]] = []
    for name in listing:
        for form in {name, os.path.basename(name)}:
            if form not in text:
                continue  # cheap test first; the regex only where the text occurs
            match = re.search(rf"(?<![\w.-]){re.escape(form)}(?![\w-]|\.\w)", text)
            if match:
                hits.append((match.start(), name))
                break
    return [name for _, name in sorted(hits)]


def _globbed(command: str, listing: Sequence[str]) -> list[str]:
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    out: list[str] = []
    for word in words:
        if not _GLOB_CHARS.search(word):
            continue
        pattern = _relative(word)
        for name in listing:
            if name not in out and (fnmatch.fnmatchcase(name, pattern)
                                    or fnmatch.fnmatchcase(os.path.basename(name), pattern)):
                out.append(name)
    return out


def _is_verdict_file(raw: bytes) -> bool:
    """Every line a verdict word (``True``, ``pass``...; numbers are data)."""
    if len(raw) > _VERDICT_FILE_BYTES:
        return False
    lines = [line.strip() for line in raw.decode("utf-8", errors="replace").splitlines()]
    words = [line for line in lines if line]
    return bool(words) and all(verdict_from_output(w) is not None
                               and not w.lstrip("+-").isdigit() for w in words)


def _is_script(name: str, raw: bytes) -> bool:
    return Path(name).suffix.lower() in CODE_SUFFIXES or raw.startswith(b"#!")


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
