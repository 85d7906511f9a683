"""Reading builtin task files back from their decoded bytes, and editing single records.

Why a second reader. A generator computes its answer from the arrays it draws, but
strength testing needs the answer of a *variant* of the written files (records
shuffled, a comment added, one record edited). So every builtin type carries a
`Reference` whose solver reads the files as any tool would -- by header and column
name, records in any order, FASTA at any line width, comments where the format has them
-- and raises ValueError on what it cannot read (a variant it cannot read is set aside:
neither a control nor a mutant). The readers here are what those solvers share; the
edit helpers are what the families' aimed mutators share: they rewrite the records they
aim at and leave every other byte (line ends, FASTA wraps, the header) as it was, so a
mutant differs from the task's file in what the question reads and nothing else.

Speed. A solver runs once per variant (about ten per file and task), so it must be
quick at the hard size: a hard matrix holds about three million entries, which numpy's
C text parser reads in a fifth of a second where a Python loop takes seconds.
"""

from __future__ import annotations

import csv
import io
import random
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from vera_env.verification.strength.reference import Mutator

__all__ = ["Mtx", "aimed", "column", "content_of", "edit_lines", "fasta_layout", "fasta_records",
           "fasta_sequence", "lines_of", "moved", "named_lines", "read_mtx", "read_table",
           "rejoin", "text_of", "tsv_fields", "vcf_table", "with_bases"]

_WHITESPACE = b" \t\r\n\v\f"


def content_of(contents: Mapping[str, bytes], name: str) -> bytes:
    """The decoded content of ``name``.

    Raises:
        ValueError: ``name`` is not among the contents.
    """
    try:
        return contents[name]
    except KeyError:
        raise ValueError(f"{name} is not among the task's files ({sorted(contents)})") from None


def text_of(contents: Mapping[str, bytes], name: str) -> str:
    """``name``'s content as UTF-8 text (UnicodeDecodeError is a ValueError)."""
    return content_of(contents, name).decode("utf-8")


# ----- FASTA -----

def fasta_records(content: bytes) -> list[tuple[bytes, bytes]]:
    """(title without ``>``, sequence without line breaks) of every record, in order.

    Raises:
        ValueError: No record, or sequence text before the first ``>`` line (a file whose
            first title line is gone).
    """
    chunks = (b"\n" + content).split(b"\n>")
    if chunks[0].strip():
        raise ValueError("not FASTA: sequence text before the first '>' title line")
    if len(chunks) < 2:
        raise ValueError("not FASTA: no '>' record")
    records = []
    for chunk in chunks[1:]:
        title, _, body = chunk.partition(b"\n")
        records.append((title.rstrip(b"\r"), body.translate(None, _WHITESPACE)))
    return records


def fasta_sequence(record: bytes) -> bytes:
    """The sequence of one ``>`` record (its title line and line breaks removed)."""
    return record.partition(b"\n")[2].translate(None, _WHITESPACE)


def fasta_layout(content: bytes) -> list[np.ndarray]:
    """Per record, the byte offsets in ``content`` of its sequence letters, in order.

    What a mutator edits through: base ``i`` of record ``r`` is ``content[layout[r][i]]``
    at whatever width the file is wrapped (see `with_bases`).

    Raises:
        ValueError: As `fasta_records`.
    """
    fasta_records(content)  # the same refusals
    data = np.frombuffer(content, dtype=np.uint8)
    starts = np.flatnonzero(data == ord(">"))
    starts = starts[(starts == 0) | (data[np.maximum(starts - 1, 0)] == ord("\n"))]
    ends = np.append(starts[1:], len(data))
    blank = np.isin(data, np.frombuffer(_WHITESPACE, dtype=np.uint8))
    layout = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        newline = content.find(b"\n", start, end)
        body = end if newline < 0 else newline + 1
        layout.append(body + np.flatnonzero(~blank[body:end]))
    return layout


def with_bases(content: bytes, offsets: np.ndarray, bases: bytes) -> bytes:
    """``content`` with the letters at ``offsets`` (from `fasta_layout`) set to ``bases``."""
    data = np.frombuffer(content, dtype=np.uint8).copy()
    data[offsets] = np.frombuffer(bases, dtype=np.uint8)
    return data.tobytes()


# ----- line-oriented text -----

def lines_of(content: bytes) -> list[bytes]:
    """The lines of ``content``, each with its ``\\n`` (the last one may lack it)."""
    parts = content.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    return lines + [parts[-1]] if parts[-1] else lines


def edit_lines(content: bytes, edits: Mapping[int, bytes]) -> bytes:
    """``content`` with line ``i`` replaced by ``edits[i]`` (``b""`` removes it)."""
    lines = lines_of(content)
    for i, line in edits.items():
        lines[i] = line
    return b"".join(lines)


def tsv_fields(line: bytes, sep: bytes = b"\t") -> list[bytes]:
    """The fields of one line, its line end set aside."""
    return line.rstrip(b"\r\n").split(sep)


def rejoin(fields: list[bytes], line: bytes, sep: bytes = b"\t") -> bytes:
    """``fields`` joined by ``sep``, ending as ``line`` ended (``\n``, ``\r\n`` or not)."""
    return sep.join(fields) + line[len(line.rstrip(b"\r\n")):]


def vcf_table(content: bytes) -> tuple[list[str], list[list[str]]]:
    """The ``#CHROM`` header's fields and every site's fields, in file order.

    Raises:
        ValueError: No ``#CHROM`` line, or a site whose field count differs from it.
    """
    header: list[str] | None = None
    rows: list[list[str]] = []
    for line in content.decode("utf-8").splitlines():
        if line.startswith("#CHROM"):
            header = line.split("\t")
        elif line.startswith("#") or not line.strip():
            continue
        elif header is None:
            raise ValueError("not VCF: a site before the #CHROM header line")
        else:
            rows.append(line.split("\t"))
    if header is None:
        raise ValueError("not VCF: no #CHROM header line")
    bad = next((i for i, row in enumerate(rows) if len(row) != len(header)), None)
    if bad is not None:
        raise ValueError(f"VCF site {bad + 1} has {len(rows[bad])} fields, the #CHROM header "
                         f"{len(header)}")
    return header, rows


def read_table(text: str, sep: str, required: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """A delimited table with a header line: (header, rows), blank lines skipped.

    Raises:
        ValueError: A required column is missing from the first line (no header), or a row
            has another number of fields than the header.
    """
    rows = [row for row in csv.reader(io.StringIO(text), delimiter=sep) if row]
    if not rows:
        raise ValueError("empty table: no header line")
    header, body = rows[0], rows[1:]
    missing = [name for name in required if name not in header]
    if missing:
        raise ValueError(f"the first line names no column {missing[0]!r}: not the header "
                         f"({','.join(header)[:80]!r})")
    bad = next((i for i, row in enumerate(body) if len(row) != len(header)), None)
    if bad is not None:
        raise ValueError(f"row {bad + 1} has {len(body[bad])} fields, the header {len(header)}")
    return header, body


def column(header: list[str], name: str) -> int:
    """The index of column ``name`` (ValueError when absent)."""
    try:
        return header.index(name)
    except ValueError:
        raise ValueError(f"no column {name!r} in the header") from None


# ----- MatrixMarket -----

@dataclass(frozen=True, slots=True)
class Mtx:
    """A MatrixMarket coordinate file, read.

    Attributes:
        shape: (rows, columns) as the size line states them.
        entries: ``(nnz, 3)`` int64: row, column (1-based, as written) and value, in
            file order.
        head: The banner and comment lines.
        size: The size line, as written.
        body: The entry lines, as written (entry ``k`` is line ``k`` of it).
    """

    shape: tuple[int, int]
    entries: np.ndarray
    head: bytes
    size: bytes
    body: bytes

    def edited(self, replace: Mapping[int, bytes], append: tuple[bytes, ...] = ()) -> bytes:
        """The file with entry line ``k`` replaced by ``replace[k]`` and ``append`` added
        at the end, the size line's entry count updated when it changes."""
        ends = np.flatnonzero(np.frombuffer(self.body, dtype=np.uint8) == 10) + 1
        if self.body and not self.body.endswith(b"\n"):
            ends = np.append(ends, len(self.body))
        starts = np.concatenate(([0], ends[:-1]))
        pieces, pos = [], 0
        for k in sorted(replace):
            pieces += [self.body[pos:int(starts[k])], replace[k]]
            pos = int(ends[k])
        tail = self.body[pos:]
        pieces.append(tail + b"\n" if append and tail and not tail.endswith(b"\n") else tail)
        pieces += list(append)
        size = self.size
        if append:
            n_rows, n_cols = self.shape
            size = b"%d %d %d\n" % (n_rows, n_cols, len(self.entries) + len(append))
        return self.head + size + b"".join(pieces)


_LAST_MTX: list[tuple[bytes, Mtx] | None] = [None]
"""The last matrix read, keyed by the identity of its bytes: strength varies a task's
files one at a time, so while the barcodes or the gene list vary the solver is handed
the very same matrix object again -- re-parsing it each time cost most of a hard
task's variant census (three million entries, a fifth of a second per parse). Identity,
not equality, is the key (the slot holds the object, so its id cannot be reused), and
the entries are read-only, so the cache can never hand out a stale or altered matrix.
The slot is read and written whole (one item of a one-item list), so threads sharing it
see one parse or another, never half of each."""


def read_mtx(content: bytes) -> Mtx:
    """Read an integer MatrixMarket coordinate matrix (the same object: parsed once).

    Raises:
        ValueError: No ``%%MatrixMarket ... coordinate integer`` banner on the first line,
            no size line, an entry that is not three integers, fewer or more entries than
            the size line states, or an index outside the stated shape.
    """
    last = _LAST_MTX[0]
    if last is not None and last[0] is content:
        return last[1]
    banner = content.split(b"\n", 1)[0].lower().split()
    if not content.startswith(b"%%MatrixMarket") or b"coordinate" not in banner \
            or b"integer" not in banner:
        raise ValueError("not an integer MatrixMarket coordinate matrix: no "
                         "'%%MatrixMarket matrix coordinate integer' banner")
    pos = 0
    while content.startswith(b"%", pos):
        pos = content.find(b"\n", pos) + 1
        if pos == 0:
            raise ValueError("MatrixMarket file without a size line")
    end = content.find(b"\n", pos)
    end = len(content) if end < 0 else end + 1
    size, body = content[pos:end], content[end:]
    try:
        n_rows, n_cols, nnz = (int(x) for x in size.split())
    except ValueError:
        raise ValueError(f"MatrixMarket size line is not three integers: {size[:60]!r}") from None
    flat = _ints(body)
    entries = flat.reshape(-1, 3) if len(flat) % 3 == 0 else None
    lines = body.count(b"\n") + (1 if body and not body.endswith(b"\n") else 0)
    if entries is None or len(entries) != nnz or lines != nnz:
        raise ValueError(f"the size line states {nnz} entries of three integers; the file "
                         f"has {lines} lines")
    if nnz and (entries[:, 0].min() < 1 or entries[:, 0].max() > n_rows
                or entries[:, 1].min() < 1 or entries[:, 1].max() > n_cols):
        raise ValueError(f"an entry's index lies outside the stated {n_rows} x {n_cols}")
    entries.setflags(write=False)
    mtx = Mtx((n_rows, n_cols), entries, content[:pos], size, body)
    _LAST_MTX[0] = (content, mtx)
    return mtx


def _ints(body: bytes) -> np.ndarray:
    """Whitespace-separated integers (numpy < 2.3 only warns on trailing garbage)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            ints: np.ndarray = np.fromstring(body, dtype=np.int64, sep=" ")
            return ints
        except (ValueError, DeprecationWarning) as exc:
            raise ValueError(f"MatrixMarket entries are not all integers: {exc}") from None


def named_lines(content: bytes, what: str) -> list[list[str]]:
    """The tab-separated fields of every line of a headerless 10x table (genes, features,
    barcodes): line ``i`` names matrix index ``i + 1``.

    Raises:
        ValueError: A blank line (every later index would shift).
    """
    lines = content.decode("utf-8").splitlines()
    if any(not line.strip() for line in lines):
        raise ValueError(f"a blank line in {what}: the matrix indices after it would shift")
    return [line.split("\t") for line in lines]


def moved(base: str, new: str, tol: float) -> bool:
    """Whether answer ``new`` differs from ``base`` by more than a numeric grader's ``tol``,
    with half a tolerance to spare for float rounding on either side (two non-numbers
    differ when their strings do): what an aimed mutator checks before it returns."""
    try:
        return abs(float(new) - float(base)) > 1.5 * tol
    except ValueError:
        return new != base


@dataclass(frozen=True, slots=True)
class _Guarded:
    mutate: Mutator

    def __call__(self, content: bytes, rng: random.Random) -> bytes | None:
        try:
            return self.mutate(content, rng)
        except (ValueError, IndexError, KeyError):
            return None  # content the family's reader refuses: no aimed mutant of it


def aimed(*mutators: Mutator) -> tuple[Mutator, ...]:
    """A family's mutators, each giving None (no mutant) instead of raising on content
    it cannot read: strength calls them on whatever it holds -- the first 32 MB of an
    ``xl`` matrix cut at a line end, say -- and an aimed mutator must not end a census."""
    return tuple(_Guarded(m) for m in mutators)
