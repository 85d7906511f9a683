"""Fingerprints a check could pin instead of the answer, and the coins each would make.

The luck bound (``luck``) assumed a coin tosses afresh on every variant. A pin gated on
a hash of what it reads does not: it is a *function* of one fingerprint of the file
(its sorted records, its record count, the values of one column), True on the file's
own value and True or False by the hash of any other. Variants that share that
fingerprint share a verdict, a variant with the file's own value passes it for free,
and a confirmation whose reserve lands on a value already seen tosses nothing.
Measured before this module: on ``tab.label_coding`` a gated pin of the records'
digit count passed the two controls that change it, the two aimed kinds that keep it
for free, and its confirmations for free (the killed kind had no reserve, so its
mutant re-ran; the reserve control kept the count), and earned in 2 of 9 seeds where
the bound promised 1 in 20 episodes for any coin.

So the bound now considers, beside a coin per run, a gate on each fingerprint of a
fixed catalog (``FACETS``): the ones a policy pins (``vera_env.evaluation.attacks``)
and the ones a question's records are made of. A check is held to the hypotheses its
verdicts are consistent with (it passed every variant with the file's own value and
gave variants sharing a value one verdict) and that its controls could tell from the
answer (one control at least moved the fingerprint: where none did, the fingerprint is,
on these variants, the answer, and a pin of it is the one fact the controls cannot
separate -- not luck). An honest check is rarely consistent with a coarse
fingerprint: it rejects the mutants that move the answer and keep the count.

A catalog is not every function of the data; a check pinning an uncatalogued one
(the sum of a column) is held to the coin per run and to the catalogued fingerprints
it happens to agree with.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vera_env.verification.strength.luck import Tosses

__all__ = ["FACETS", "Shown", "facets", "hypotheses", "runs", "separator"]

_COLUMNS = 12
_META = (b"#", b"@", b"%", b">")
_DIGITS = b"0123456789"

FACETS: tuple[str, ...] = (
    "sorted records", "records", "record digits", "record bytes", "lines", "bytes",
    "digits", *(f"column {k + 1}" for k in range(_COLUMNS)),
)
"""The catalog, in the order ``facets`` returns them. "Records" are the lines that are
not header or meta lines (not starting with ``#``, ``@``, ``%`` or ``>``); a column
is the multiset of one field over the records (sorted: an order-free pin)."""


def separator(content: bytes) -> bytes | None:
    """The field separator a reader of ``content`` would guess: tab, else comma, where
    most records hold one; else None (runs of blanks, awk's default)."""
    records = _records(content)[:200]
    for sep in (b"\t", b","):
        if records and sum(sep in r for r in records) * 2 > len(records):
            return sep
    return None


def facets(content: bytes, sep: bytes | None) -> tuple[str, ...]:
    """Every fingerprint of ``FACETS`` of ``content`` (decoded), fields split by ``sep``
    (the file's own separator: a variant is split as the file is)."""
    lines = _lines(content)
    records = [line for line in lines if not line.startswith(_META)]
    joined = b"\n".join(records)
    out = [_md5(b"\n".join(sorted(records))), str(len(records)), str(_digits(joined)),
           str(len(joined)), str(len(lines)), str(len(content)), str(_digits(content))]
    rows = [r.split(sep) if sep is not None else r.split() for r in records]
    for k in range(_COLUMNS):
        column = sorted(row[k] if k < len(row) else b"" for row in rows)
        out.append(_md5(b"\n".join(column)) if any(column) else "")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Shown:
    """One variant a check's verdict was read on.

    Attributes:
        facets: Its fingerprints (``facets``).
        kind: Its kind of mutation; None for a control.
        passed: The check held on it.
    """

    facets: tuple[str, ...]
    kind: str | None
    passed: bool


def hypotheses(own: tuple[str, ...], shown: Sequence[Shown],
               confirms: Sequence[tuple[tuple[str, ...] | None, tuple[str, ...] | None]]
               ) -> list[Tosses]:
    """The gates on a catalogued fingerprint that the check's verdicts are consistent
    with and its controls could tell from the answer, each as the tosses it would have
    won (``luck.Tosses``).

    Args:
        own: The file's fingerprints.
        shown: The controls (all passed) and mutants, with the check's verdicts.
        confirms: Per planned confirmation, the fingerprints of the reserve mutant and
            reserve control it runs (None: a variant already shown runs again).
    """
    out = []
    for i in range(len(own)):
        tosses = _gate(own[i], [(s.facets[i], s.kind, s.passed) for s in shown],
                       [(m[i] if m else None, c[i] if c else None) for m, c in confirms],
                       f"a gate on a hash of its {FACETS[i]}")
        if tosses is not None:
            out.append(tosses)
    return out


def _gate(own: str, shown: list[tuple[str, str | None, bool]],
          confirms: list[tuple[str | None, str | None]], name: str) -> Tosses | None:
    verdict: dict[str, bool] = {own: True}
    for value, _, passed in shown:
        if verdict.setdefault(value, passed) != passed:
            return None  # not a function of this fingerprint
    forced = {value for value, kind, _ in shown if kind is None and value != own}
    if not forced:
        return None  # no control moved it: on these variants it is the answer
    # Values that must share a verdict: the draws of one kind. The file's own value
    # and the controls' are one block, passed; every other block passed or rejected.
    parent: dict[str, str] = {}

    def find(v: str) -> str:
        while parent.setdefault(v, v) != v:
            v = parent[v]
        return v
    for v in forced:
        parent[find(v)] = find(own)
    by_kind: dict[str, list[str]] = {}
    for value, kind, _ in shown:
        if kind is not None:
            by_kind.setdefault(kind, []).append(value)
    for values in by_kind.values():
        for v in values[1:]:
            parent[find(v)] = find(values[0])
    blocks: dict[str, set[str]] = {}
    for v in {value for value, _, _ in shown} | {own}:
        blocks.setdefault(find(v), set()).add(v)
    passed_block = blocks.pop(find(own))
    seen = {value for value, _, _ in shown} | {own}
    plan = []
    for mutant, control in confirms:
        plan.append((mutant is not None and mutant not in seen,
                     control is not None and control not in seen))
        seen |= {v for v in (mutant, control) if v is not None}
    return Tosses(len(passed_block - {own}), tuple(len(b) for b in blocks.values()),
                  tuple(plan), name)


def runs(controls: int, draws: Mapping[str, int], confirms: int, late: bool) -> Tosses:
    """The coin per run: every control, every draw and every confirmation a toss."""
    return Tosses(controls, tuple(draws.values()), ((True, late),) * confirms)


def _lines(content: bytes) -> list[bytes]:
    lines = content.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _records(content: bytes) -> list[bytes]:
    return [line for line in _lines(content) if not line.startswith(_META)]


def _digits(data: bytes) -> int:
    return sum(data.count(bytes([d])) for d in _DIGITS)


def _md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()[:16]  # a fingerprint, not security
