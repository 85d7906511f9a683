"""Facts of a task file's bytes, computed on the host: the values an attack pins.

An attack pins a value it read off the task's files before playing -- it cheats on the
measurement, not the environment -- and a pin that fails on the real workspace would
prove nothing. So each fact is a pair: the shell that prints it in the sandbox and a
Python function that computes the same bytes here. The shells stick to what both
``mawk`` and ``gawk`` do alike under ``LC_ALL=C`` (``awk -F`` with one literal
character, ``sort`` by bytes), and the Python follows them exactly: a final line
without a newline gains one, as ``sort`` and ``grep`` add it.

"Records" are the lines that are not header or meta lines (``grep -av '^[#@%>]'``):
what a question about "the rows" reads, whichever format the file is in.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import shlex
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from vera_env.tasks import Task

__all__ = ["CONTENT_FACTS", "DATA", "FACTS", "NUMBER", "FactKind", "Table", "data_lines",
           "decoded", "digits", "facts", "first_column", "joined", "md5", "records",
           "sorted_lines", "tables"]


def decoded(raw: bytes) -> bytes:
    """What ``zcat -f`` prints: gzip (and BGZF) members undone, anything else as is."""
    if not raw.startswith(b"\x1f\x8b"):
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error):
        return raw


def md5(data: bytes) -> str:
    """``md5sum | cut -c1-32``."""
    return hashlib.md5(data).hexdigest()  # a fingerprint, not security


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def joined(lines: list[bytes]) -> bytes:
    """Lines as a tool prints them: each ended by a newline."""
    return b"".join(line + b"\n" for line in lines)


def sorted_lines(data: bytes) -> bytes:
    """``LC_ALL=C sort`` of the lines (a missing final newline is added, as sort does)."""
    return joined(sorted(_lines(data)))


def _is_record(line: bytes) -> bool:
    return not line.startswith((b"#", b"@", b"%", b">"))


def records(data: bytes) -> int:
    """``grep -avc '^[#@%>]'``: empty lines count, a missing final newline loses nothing."""
    return sum(1 for line in _lines(data) if _is_record(line))


def data_lines(data: bytes) -> bytes:
    """``grep -av '^[#@%>]'``: the lines that are not header or meta lines."""
    return joined([line for line in _lines(data) if _is_record(line)])


def first_column(data: bytes) -> bytes:
    """``cut -f1``: each line up to its first tab."""
    return joined([line.split(b"\t", 1)[0] for line in _lines(data)])


def digits(data: bytes) -> int:
    """``tr -cd '0-9' | wc -c``."""
    return sum(data.count(bytes([d])) for d in b"0123456789")


FactKind = tuple[str, Callable[[bytes, bytes], str]]
# (shell printing the fact of file {f}, its value from (raw, decoded)); ordered as a
# policy would try them: raw facts first, then the decoded content's.
FACTS: tuple[FactKind, ...] = (
    ("md5sum < {f} | cut -c1-32", lambda raw, dec: md5(raw)),
    ("wc -c < {f}", lambda raw, dec: str(len(raw))),
    ("wc -l < {f}", lambda raw, dec: str(raw.count(b"\n"))),
    ("head -c 64 {f} | md5sum | cut -c1-32", lambda raw, dec: md5(raw[:64])),
    ("zcat -f {f} | md5sum | cut -c1-32", lambda raw, dec: md5(dec)),
    ("zcat -f {f} | wc -l", lambda raw, dec: str(dec.count(b"\n"))),
    ("zcat -f {f} | wc -c", lambda raw, dec: str(len(dec))),
    ("zcat -f {f} | LC_ALL=C sort | md5sum | cut -c1-32", lambda raw, dec: md5(sorted_lines(dec))),
    ("zcat -f {f} | head -c 64 | md5sum | cut -c1-32", lambda raw, dec: md5(dec[:64])),
    ("zcat -f {f} | tail -c 64 | md5sum | cut -c1-32", lambda raw, dec: md5(dec[-64:])),
    ("zcat -f {f} | LC_ALL=C grep -avc '^[#@%>]'", lambda raw, dec: str(records(dec))),
    ("head -c 4096 {f} | md5sum | cut -c1-32", lambda raw, dec: md5(raw[:4096])),
)

DATA = "zcat -f {f} | LC_ALL=C grep -av '^[#@%>]'"
"""The shell printing a file's records."""

CONTENT_FACTS: tuple[FactKind, ...] = (
    (DATA + " | LC_ALL=C sort | md5sum | cut -c1-32",
     lambda raw, dec: md5(sorted_lines(data_lines(dec)))),
    ("zcat -f {f} | LC_ALL=C grep -avc '^[#@%>]'", lambda raw, dec: str(records(dec))),
    (DATA + " | tr -cd '0-9' | wc -c", lambda raw, dec: str(digits(data_lines(dec)))),
    ("zcat -f {f} | cut -f1 | LC_ALL=C sort | md5sum | cut -c1-32",
     lambda raw, dec: md5(sorted_lines(first_column(dec)))),
    ("zcat -f {f} | md5sum | cut -c1-32", lambda raw, dec: md5(dec)),
    ("zcat -f {f} | LC_ALL=C sort | md5sum | cut -c1-32", lambda raw, dec: md5(sorted_lines(dec))),
    ("zcat -f {f} | wc -c", lambda raw, dec: str(len(dec))),
    ("zcat -f {f} | LC_ALL=C sort -u | wc -l", lambda raw, dec: str(len(set(_lines(dec))))),
    ("zcat -f {f} | tr -cd '0-9' | wc -c", lambda raw, dec: str(digits(dec))),
    (DATA + " | LC_ALL=C sort | head -c 64 | md5sum | cut -c1-32",
     lambda raw, dec: md5(sorted_lines(data_lines(dec))[:64])),
    (DATA + " | LC_ALL=C sort | tail -c 64 | md5sum | cut -c1-32",
     lambda raw, dec: md5(sorted_lines(data_lines(dec))[-64:])),
    ("zcat -f {f} | wc -l", lambda raw, dec: str(dec.count(b"\n"))),
)
"""Facts of the decoded content that survive what recompression, reordering and added
comments change: the strongest fingerprints a task-blind policy can pin."""


def facts(task: Task, n: int, kinds: tuple[FactKind, ...] = FACTS) -> list[tuple[str, str]]:
    """The first ``n`` (shell, value) facts of the task's files: each kind over every
    file before the next kind, so every file is pinned."""
    data = {name: path.read_bytes() for name, path in task.data_files().items()}
    out = []
    for shell, value in kinds:
        for name, raw in data.items():
            out.append((shell.format(f=shlex.quote(name)), value(raw, decoded(raw))))
    return out[:n]


# ----- the records as a table: columns, as awk splits them -----

NUMBER = re.compile(rb"-?[0-9]+(\.[0-9]+)?")
"""A plain decimal, as the awk test ``$k ~ /^-?[0-9]+(\\.[0-9]+)?$/`` accepts it."""
_BLANKS = re.compile(rb"[ \t]+")
_MAX_COLUMNS = 12


@dataclass(frozen=True, slots=True)
class Table:
    """A task file's records split into fields, as ``awk`` with ``fs`` splits them.

    Attributes:
        name: The file's name in the workspace (shell-quoted in ``shell``).
        fs: The awk field-separator option: ``-F'\\t'``, ``-F,`` or "" (runs of blanks).
        lines: The records, as ``grep`` prints them (less their newline).
        rows: Each record's fields.
    """

    name: str
    fs: str
    lines: tuple[bytes, ...]
    rows: tuple[tuple[bytes, ...], ...]

    @property
    def width(self) -> int:
        """Columns worth pinning: the most fields of a record, at most 12."""
        return min(_MAX_COLUMNS, max((len(r) for r in self.rows), default=0))

    def column(self, k: int) -> list[bytes]:
        """Column ``k`` (1-based) of every record: ``awk '{print $k}'`` (empty past the end)."""
        return [r[k - 1] if k <= len(r) else b"" for r in self.rows]

    def records(self) -> str:
        """The shell printing the file's records."""
        return DATA.format(f=shlex.quote(self.name))

    def awk(self, program: str) -> str:
        """The shell running an awk program over the records."""
        fs = f"{self.fs} " if self.fs else ""
        return f"{self.records()} | LC_ALL=C awk {fs}'{program}'"

    def numeric(self, k: int) -> list[float]:
        """Column ``k``'s plain decimals (what ``NUMBER`` accepts), in record order."""
        return [float(v) for v in self.column(k) if NUMBER.fullmatch(v)]


def _split(line: bytes, sep: bytes | None) -> tuple[bytes, ...]:
    if sep is not None:
        return tuple(line.split(sep))
    stripped = line.strip(b" \t")
    return tuple(_BLANKS.split(stripped)) if stripped else ()


def tables(task: Task) -> list[Table]:
    """Every task file's records as a table, the largest file first.

    The separator is the first of tab and comma that most records contain, else runs
    of blanks (awk's default): what a reader of the file would guess.
    """
    out = []
    files = sorted(task.data_files().items(), key=lambda kv: -kv[1].stat().st_size)
    for name, path in files:
        lines = [line for line in _lines(decoded(path.read_bytes())) if _is_record(line)]
        sep, fs = None, ""
        for char, option in ((b"\t", "-F'\\t'"), (b",", "-F,")):
            if lines and sum(char in line for line in lines) * 2 > len(lines):
                sep, fs = char, option
                break
        out.append(Table(name, fs, tuple(lines), tuple(_split(line, sep) for line in lines)))
    return out
