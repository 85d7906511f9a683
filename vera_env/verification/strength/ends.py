"""The records that hold an end of a file: its least and greatest record, and each
column's least and greatest value, in byte order and as numbers.

Why. A control that drops records the question never reads (``drop_irrelevant``) moves
an end of a column only where the record it drops holds that end. A task whose reference
is a program (``program``) knows only the few unread records its probes found (8 of a
file), so a random tenth of those almost never held one, and a pin of a column's least
value held by an unread record survived every control. Measured on the hand-written
``table.myc_reads`` (281 rows of read counts; the question sums the MYC rows): the
``slices`` policy's pin of the least read count in byte order (a KRAS library's) earned
0.021 against the reference's 0.062 (3.0x), the one task of the hand suite a
no-analysis policy was within 5x of. Dropping every unread end on every draw, for every
reference, killed it but cost family references (``tab.fold_change`` 0.125 -> 0.062):
the same records gone on every control narrowed how the file varied. So a program
reference probes the records found here, and each draw of its ``drop_irrelevant`` drops
the unread holders of a random share of the ends (``transforms``).

An end held by more than ``_HOLDERS`` records (a column of few values) is not one a drop
of a few records moves; it is left out. A file of fewer than ``_MIN_RECORDS`` records has
none: its ends are most of its lines, and an exported ``tab.sentinel_mean`` lost its
reference's codebook evidence (0.146 -> 0.104) when lines of its 11-line codebook, each
an end, were dropped under an honest lookup by line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vera_env.verification.strength.fingerprints import separator

__all__ = ["end_groups"]

_COLUMNS = 12
_HOLDERS = 4
_MIN_RECORDS = 32
_MAX_RECORDS = 200_000
_MAX_GROUPS = 32
_NUMBER = re.compile(rb"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")

_last: list[tuple[Sequence[bytes], tuple[tuple[int, ...], ...]]] = []


def end_groups(records: Sequence[bytes]) -> tuple[tuple[int, ...], ...]:
    """The ends of ``records`` (lines, or a FASTA/FASTQ record each), each as the indices
    of the records that hold it: at most ``_MAX_GROUPS``, none held by more than
    ``_HOLDERS``; none for a file of fewer than ``_MIN_RECORDS`` records or more than
    ``_MAX_RECORDS``. Remembered for
    the last list asked about (a file's draws ask again and again)."""
    last = _last[0] if _last else None  # one read: threads may replace it
    if last is not None and last[0] is records:
        return last[1]
    groups = _groups(records) if _MIN_RECORDS <= len(records) <= _MAX_RECORDS else ()
    _last[:] = [(records, groups)]
    return groups


def _groups(records: Sequence[bytes]) -> tuple[tuple[int, ...], ...]:
    lines = [r.rstrip(b"\r\n") for r in records]
    sep = separator(b"\n".join(lines[:200]))
    rows = [line.split(sep) if sep is not None else line.split() for line in lines]
    found: dict[tuple[int, ...], None] = {}
    for group in _extremes([(line, i) for i, line in enumerate(lines)]):
        found.setdefault(group)
    for k in range(min(_COLUMNS, max((len(row) for row in rows), default=0))):
        present = [(row[k], i) for i, row in enumerate(rows) if k < len(row)]
        numbers = [(float(v), i) for v, i in present if _NUMBER.fullmatch(v)]
        for group in (*_extremes(present), *_extremes(numbers)):
            found.setdefault(group)
    return tuple(found)[:_MAX_GROUPS]


def _extremes(pairs: Sequence[tuple[object, int]]) -> list[tuple[int, ...]]:
    """The holders of the least and of the greatest value, where few enough hold it."""
    if not pairs:
        return []
    values = [v for v, _ in pairs]
    out = []
    for end in (min(values), max(values)):  # type: ignore[type-var]
        holders = tuple(i for v, i in pairs if v == end)
        if len(holders) <= _HOLDERS:
            out.append(holders)
    return out

