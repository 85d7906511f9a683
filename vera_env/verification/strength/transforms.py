"""Answer-preserving transformations of a task file: the candidates for controls.

A control must change the file's bytes and keep its answer, so that only a check that
reads what the question is about holds on every control. The transforms here are
format-aware but know nothing of any question: whether one keeps a task's answer is
declared by the task's family (``Reference.preserving``) and confirmed by its solver
(``variants``). They work on *decoded* content (a ``.gz`` is decompressed first and
encoded again afterwards).

These re-serialise a file or drop what the question never reads; they leave every read
record as it was, so a fingerprint of exactly the records a question reads survived
them. The controls that rewrite those records (numbers re-formatted, values moved or
permuted within a group, ids renamed, SNV alleles complemented, prose re-worded) are
in ``rewrites``: probed on every file, kept where the reference confirms the answer.

A file is a header and a list of records, by format (the name, less a compression
suffix, says which):

========================  =====================================  ====================
format                    header                                 record
========================  =====================================  ====================
FASTA (.fa .fasta .fna)   text before the first ``>``            a ``>`` line and its
                                                                 sequence lines
FASTQ (.fastq .fq)        none                                   four lines
VCF                       the leading ``#`` lines                one line
MatrixMarket (.mtx)       the leading ``%`` lines and the size   one line
GTF, GFF                  the leading ``#`` lines                one line
SAM                       the leading ``@`` lines                one line
other text (CSV, TSV)     the first line                         one line
binary (NUL in the head)  —                                      — (no transform)
========================  =====================================  ====================
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import numpy as np

from vera_env.verification.strength.ends import end_groups
from vera_env.verification.strength.reference import ControlTransform

__all__ = ["apply_control", "file_format", "join_records", "split_records"]

_COMPRESSED = (".gz", ".bgz", ".bz2", ".xz")
_FORMATS = {".fa": "fasta", ".fasta": "fasta", ".fna": "fasta", ".fas": "fasta",
            ".faa": "fasta", ".ffn": "fasta", ".fastq": "fastq", ".fq": "fastq",
            ".vcf": "vcf", ".mtx": "mtx", ".gtf": "gff", ".gff": "gff", ".gff3": "gff",
            ".sam": "sam", ".bam": "binary", ".h5ad": "binary", ".h5": "binary"}
_HEADER_PREFIX = {"vcf": b"#", "mtx": b"%", "gff": b"#", "sam": b"@"}
_WIDTHS = (50, 60, 70, 80, 100)
_SHARE = 0.1
_FULL_SHUFFLE = 50_000
_HEAD_RECORDS = 200


def file_format(name: str) -> str:
    """``fasta``, ``fastq``, ``vcf``, ``mtx``, ``gff``, ``sam``, ``binary`` or ``text``."""
    lower = name.lower()
    for suffix in _COMPRESSED:
        if lower.endswith(suffix):
            lower = lower[:-len(suffix)]
            break
    dot = lower.rfind(".")
    return _FORMATS.get(lower[dot:], "text") if dot >= 0 else "text"


def split_records(name: str, content: bytes) -> tuple[bytes, list[bytes]] | None:
    """(header, records) of a text file, each record with its line ends; None if binary.

    ``join_records(header, records)`` gives ``content`` back (a missing final newline
    is added).
    """
    fmt = file_format(name)
    if fmt == "binary" or b"\0" in content[:8192]:
        return None
    lines = content.splitlines(keepends=True)
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"
    if fmt == "fasta":
        return _fasta_records(lines)
    if fmt == "fastq":
        return b"", [b"".join(lines[i:i + 4]) for i in range(0, len(lines), 4)]
    prefix = _HEADER_PREFIX.get(fmt)
    n = 0
    if prefix is None:
        n = min(1, len(lines))
    else:
        while n < len(lines) and lines[n].startswith(prefix):
            n += 1
        if fmt == "mtx" and n < len(lines):
            n += 1  # the size line
    return b"".join(lines[:n]), lines[n:]


_last_split: list[tuple[str, bytes, tuple[bytes, list[bytes]] | None]] = []


def _split_once(name: str, content: bytes) -> tuple[bytes, list[bytes]] | None:
    """``split_records``, remembered for the last content (the transforms of one file
    are tried on the same bytes again and again; transforms never mutate the list)."""
    last = _last_split[0] if _last_split else None  # one read: threads may replace it
    if last is not None and last[0] == name and last[1] is content:
        return last[2]
    split = split_records(name, content)
    _last_split[:] = [(name, content, split)]
    return split


def join_records(header: bytes, records: list[bytes]) -> bytes:
    """The file made of ``header`` and ``records``."""
    return header + b"".join(records)


def apply_control(transform: ControlTransform, name: str, content: bytes,
                  rng: random.Random, irrelevant: Callable[[bytes], bool] | None = None,
                  *, ends: bool = False) -> bytes | None:
    """``content`` transformed by ``transform``, or None when it does not apply or would
    not change the bytes (``recompress`` returns the content unchanged: the encoder
    writes it with other settings, and only for a compressed file).

    Args:
        transform: One of `vera_env.verification.strength.reference.CONTROL_TRANSFORMS`.
        name: The file's workspace name (its format).
        content: The decoded content.
        rng: Draws (which records, which width, the comment's text).
        irrelevant: For ``drop_irrelevant``: which records the question never reads.
        ends: For ``drop_irrelevant``: also drop the unread holders of a random share
            (each with even odds, one at least) of the file's ends (``ends``).
    """
    if transform == "recompress":  # a BAM is BGZF: gzip members
        return content if name.lower().endswith((*_COMPRESSED, ".bam")) else None
    split = _split_once(name, content)
    if split is None:
        return None
    header, records = split
    if transform == "drop_irrelevant":
        changed = _drop_irrelevant(name, header, records, rng, irrelevant, ends=ends)
    else:
        changed = _TRANSFORMS[transform](name, header, records, rng, irrelevant)
    return changed if changed is not None and changed != content else None


def _shuffle(name: str, header: bytes, records: list[bytes], rng: random.Random,
             irrelevant: Callable[[bytes], bool] | None) -> bytes | None:
    """Records in another order. A large file gets the first records and a sample of
    the others permuted among themselves (a check on any part of the file meets moved
    records; permuting millions of lines would cost seconds and prove nothing more)."""
    n = len(records)
    if not any(r != records[0] for r in records):
        return None  # fewer than two distinct records: every order is the same bytes
    if n < 4:  # a permutation can be the identity; a rotation is not
        k = 1 + rng.randrange(n - 1)
        return join_records(header, records[k:] + records[:k])
    if n <= _FULL_SHUFFLE:
        positions = list(range(n))
    else:
        positions = sorted({*range(_HEAD_RECORDS), *rng.sample(range(n), _FULL_SHUFFLE)})
    order = np.random.default_rng(rng.getrandbits(64)).permutation(len(positions)).tolist()
    moved = records[:]
    for at, src in zip(positions, order, strict=True):
        moved[at] = records[positions[src]]
    return join_records(header, moved)


def _drop_irrelevant(name: str, header: bytes, records: list[bytes], rng: random.Random,
                     irrelevant: Callable[[bytes], bool] | None, *, ends: bool = False
                     ) -> bytes | None:
    if irrelevant is None:
        return None
    candidates = [i for i, record in enumerate(records) if irrelevant(record)]
    if not candidates or len(candidates) == len(records) == 1:
        return None
    k = min(len(candidates), max(1, round(_SHARE * len(candidates))), len(records) - 1)
    drop = set(rng.sample(candidates, k))
    if ends:
        unread = set(candidates)
        movable = [g for g in end_groups(records) if unread.issuperset(g)]
        chosen = [g for g in movable if rng.random() < 0.5]
        if movable and not chosen:
            chosen = [rng.choice(movable)]
        for group in chosen:
            if len(drop | set(group)) < len(records):
                drop |= set(group)
    return join_records(header, [r for i, r in enumerate(records) if i not in drop])


def _repeat_irrelevant(name: str, header: bytes, records: list[bytes], rng: random.Random,
                       irrelevant: Callable[[bytes], bool] | None) -> bytes | None:
    """Records the question never reads, repeated: a few of them, each one to four more
    times, at random places. The line count moves by a drawn amount, so two such
    controls disagree with each other, not only with the file."""
    if irrelevant is None:
        return None
    candidates = [i for i, record in enumerate(records) if irrelevant(record)]
    if not candidates:
        return None
    k = min(len(candidates), max(1, round(_SHARE * len(candidates))))
    out = records[:]
    open_end = not records[-1].endswith(b"\n")  # a missing final newline stays last
    for i in rng.sample(candidates, k):
        record = records[i] if records[i].endswith(b"\n") else records[i] + b"\n"
        for _ in range(rng.randint(1, 4)):
            out.insert(rng.randint(0, len(out) - open_end), record)
    return join_records(header, out)


def _rewrap(name: str, header: bytes, records: list[bytes], rng: random.Random,
            irrelevant: Callable[[bytes], bool] | None) -> bytes | None:
    if file_format(name) != "fasta" or not records:
        return None
    widths = [len(line) - 1 for r in records for line in r.splitlines(keepends=True)[1:-1]]
    current = max(widths, default=0)
    width = rng.choice([w for w in _WIDTHS if w != current])
    out = []
    for record in records:
        title, _, body = record.partition(b"\n")
        seq = re.sub(rb"\s+", b"", body)
        lines = [seq[i:i + width] + b"\n" for i in range(0, len(seq), width)]
        out.append(title + b"\n" + b"".join(lines))
    return join_records(header, out)


def _add_comment(name: str, header: bytes, records: list[bytes], rng: random.Random,
                 irrelevant: Callable[[bytes], bool] | None) -> bytes | None:
    fmt = file_format(name)
    note = f"{rng.getrandbits(48):012x}".encode()
    lines = header.splitlines(keepends=True)
    if fmt == "vcf":  # ##fileformat must stay the first line
        line, at = b"##vera_note=" + note + b"\n", 1
    elif fmt == "mtx":  # the %%MatrixMarket banner must stay first
        line, at = b"% " + note + b"\n", 1
    elif fmt == "gff":  # ##gff-version must stay first
        line, at = b"# " + note + b"\n", 1 if lines[:1] and lines[0].startswith(b"##") else 0
    elif fmt == "sam":
        line, at = b"@CO\t" + note + b"\n", len(lines)
    else:
        return None
    return join_records(b"".join(lines[:at] + [line] + lines[at:]), records)


def _fasta_records(lines: list[bytes]) -> tuple[bytes, list[bytes]]:
    starts = [i for i, line in enumerate(lines) if line.startswith(b">")]
    if not starts:
        return b"".join(lines), []
    ends = starts[1:] + [len(lines)]
    return (b"".join(lines[:starts[0]]),
            [b"".join(lines[s:e]) for s, e in zip(starts, ends, strict=True)])


_TRANSFORMS: dict[str, Callable[[str, bytes, list[bytes], random.Random,
                                 Callable[[bytes], bool] | None], bytes | None]] = {
    "shuffle_records": _shuffle,
    "repeat_irrelevant": _repeat_irrelevant,
    "rewrap": _rewrap,
    "add_comment": _add_comment,
}
