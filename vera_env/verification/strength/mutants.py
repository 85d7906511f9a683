"""Mutants of a task file's content: the same kind of data with different values.

Strength testing (``vera_env.verification.strength``) replays the episode on variants
of the task's source files and re-runs a passing check there. A check that passes on
every mutant does not depend on the data (``echo True``, ``test -f qc.mtx``) and earns
nothing. So a mutant must change what a real check looks at — values, rows, order, the
header — and keep what a vacuous check looks at: the file exists under the same name,
is the same kind (``variants`` re-encodes a ``.gz`` as gzip) and is **never emptied**.
An emptied file would "kill" ``test -s x`` and ``grep -q . x``, which read no value.

Text is mutated by lines, one operator per mutant in turn:

* ``drop_lines``: about a tenth of the lines after the first removed (at least one);
* ``perturb_numbers``: every number moved by 10-50 % (at least one unit of its last
  digit), up or down at random — on every line that holds one in a small file (100
  such lines or fewer: a codebook, a sample sheet), on a random half of them in a
  larger one, at most 50,000 lines: a check that pins any value of a small file, or a
  sum over a large one, dies on it;
* ``shuffle_rows``: the lines after the first put in random order;
* ``drop_header``: the column header removed — the first line after the meta lines
  (``##`` in a VCF, ``%`` in a MatrixMarket file), else the first line.

An operator that cannot change the content (shuffling one line) or repeats an earlier
mutant falls back to ``duplicate_lines`` (about a tenth of the lines repeated), then
``edit_chars`` (a run of about a tenth of one line's characters deleted: a sequence on
one line has no other content to change), then the others with a fresh draw. Binary
content gets ``flip_bytes`` and ``truncate_tail``. Numbers of any length are moved
(a 5,000-digit integer once made ``int()`` raise out of ``step()``): a number
too long for arithmetic has one of its digits changed instead.

Everything is drawn from ``random.Random`` seeded with (seed, file name, mutant index,
attempt), so the mutants — and the verdicts on them — are reproducible.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from hashlib import sha256

import numpy as np

__all__ = ["DRAWS", "RECORD_OPERATORS", "RESERVE", "TEXT_OPERATORS", "Mutant", "draw_of", "kind_of",
           "mutant_candidates", "mutant_kinds", "mutate_content", "window"]

TEXT_OPERATORS: tuple[str, ...] = ("drop_lines", "perturb_numbers", "shuffle_rows",
                                   "drop_header")
_TEXT_FALLBACKS: tuple[str, ...] = ("duplicate_lines", "edit_chars", "perturb_numbers",
                                    "drop_lines", "shuffle_rows")
_BINARY_OPERATORS: tuple[str, ...] = ("flip_bytes", "truncate_tail")
RECORD_OPERATORS: tuple[str, ...] = ("drop_record", "perturb_record")
"""Edits of one record: mutants of another kind than the bulk operators, so that checks
of different facts fail on different mutants (``Reference``-classified tasks only)."""
DRAWS = 2
"""Mutants drawn per kind of mutation for a classified file (``mutant_kinds``): a check
of a fact of the data says the same on every draw of one kind, a gate on a hash of the
value it reads does not."""
RESERVE = 5
"""Further draws of each kind kept for confirmations (``mutant_kinds``): a kill is
confirmed on mutants of its kind the check has not seen, so a gate on a hash of what it
reads (True on some mismatches) is tossed again on each, where re-running the same
mutant would give its verdict again. Five, not three: a check held to a gate on a
fingerprint only one shown control moved needs five or six tossing confirmations by the
sixth check tested (``luck``, ``fingerprints``), and a check that kills one kind has only
that kind's reserves (measured: with three, four reference checks of
``mtx.knockout_gene`` ran out)."""
_SHARE = 0.1
# Edits per mutant are capped so a mutant of a million-line file costs about a second
# (a changed sum, count or order is as visible in 10^4 lines as in 10^6).
_MAX_EDITED_LINES = 100_000
_MAX_PERTURBED_LINES = 50_000
_PERTURB_ALL_LINES = 100
_NUMBER_SCAN_LINES = 50_000
_META = (b"##", b"%")
_MAX_META_LINES = 10_000
# Longer integers (and mantissas) are edited as digit strings, not parsed: Python
# refuses to convert more than 4,300 digits, and arithmetic on them proves nothing more.
_MAX_ARITHMETIC_DIGITS = 300
_NUMBER = re.compile(rb"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutated version of a file's content.

    Attributes:
        label: ``<file>:<operator>#<index>``, e.g. ``values.txt:drop_lines#0``.
        content: The mutated (decoded) content.
    """

    label: str
    content: bytes


def mutate_content(name: str, content: bytes, *, n: int, seed: int) -> list[Mutant]:
    """Up to ``n`` distinct mutants of ``content``, none equal to it, none empty.

    Args:
        name: The file's workspace name (part of the seed and of each label).
        content: The decoded content (already cut to the window).
        n: Mutants wanted; fewer come back when the content allows no more.
        seed: ``StrengthConfig.seed``.
    """
    if not content:
        return []
    binary = b"\0" in content[:8192]
    primary = _BINARY_OPERATORS if binary else TEXT_OPERATORS
    fallbacks = _BINARY_OPERATORS if binary else _TEXT_FALLBACKS
    seen = {sha256(content).digest()}
    built: list[Mutant] = []
    for index in range(n):
        for attempt, operator in enumerate((primary[index % len(primary)], *fallbacks)):
            rng = random.Random(f"{seed}|{name}|{index}|{attempt}")
            changed = _OPERATORS[operator](content, rng)
            digest = sha256(changed).digest() if changed else b""
            if changed and digest not in seen:
                seen.add(digest)
                built.append(Mutant(f"{name}:{operator}#{index}", changed))
                break
    return built


def mutant_candidates(name: str, content: bytes, *, seed: int, limit: int,
                      aimed: tuple[Callable[[bytes, random.Random], bytes | None], ...] = ()
                      ) -> list[Mutant]:
    """Up to ``limit`` distinct candidate mutants, for a reference to classify.

    The family's aimed mutators come first, then the operators in turn — bulk
    (``TEXT_OPERATORS``) and single-record (``RECORD_OPERATORS``) alternating — so that a
    short list already holds mutants of different kinds. None equals ``content``.

    Args:
        name: The file's workspace name (part of the seed and of each label).
        content: The decoded content (already cut to the window).
        seed: ``StrengthConfig.seed``.
        limit: Candidates wanted at most.
        aimed: The family's mutators for this file (``Reference.mutators``).
    """
    if not content:
        return []
    binary = b"\0" in content[:8192]
    ops: list[tuple[str, Callable[[bytes, random.Random], bytes | None]]] = []
    generic = _BINARY_OPERATORS if binary else tuple(
        op for pair in zip(TEXT_OPERATORS, RECORD_OPERATORS * 2, strict=False) for op in pair)
    while len(ops) < 3 * max(1, limit):  # rounds: the draws differ by index
        ops += [(f"aimed{i}", m) for i, m in enumerate(aimed)]
        ops += [(op, _OPERATORS[op]) for op in generic]
    seen = {sha256(content).digest()}
    built: list[Mutant] = []
    for index, (label, operator) in enumerate(ops):
        if len(built) >= limit:
            break
        changed = operator(content, random.Random(f"{seed}|{name}|cand|{index}"))
        digest = sha256(changed).digest() if changed else b""
        if changed and digest not in seen:
            seen.add(digest)
            built.append(Mutant(f"{name}:{label}#{index}", changed))
    return built


def mutant_kinds(name: str, content: bytes, *, seed: int, draws: int = DRAWS,
                 aimed: tuple[Callable[[bytes, random.Random], bytes | None], ...] = (),
                 reserve: int = 0) -> Iterator[list[Mutant]]:
    """Kinds of mutation of ``content``, each as ``draws`` distinct mutants, for a
    reference to classify: the family's aimed mutators first, then the bulk operators
    (``TEXT_OPERATORS``), then the single-record ones (``RECORD_OPERATORS``), then all
    of them again with fresh draws (labelled ``<kind>+``); binary content gets the
    binary operators. A kind whose draws cannot all be built (or repeat a mutant
    already built) is left out — but for an aimed edit with a single possible outcome
    (the one value the family can move), which is kept as one draw.

    Each draw of a kind applies its edit once more to the draw before it (the header
    drop aside: twice would drop a data row), so the draws make the same sort of change
    by different amounts: a fact about the data (a count, a sum, the answer) changes on
    all of them or on none, and to a different value on each — where a pin gated on a
    hash of the value it reads (False on some mismatches, True on the rest) splits
    them, even where the value has few states (one count moved by one, then by two).
    ``StrengthSession`` refuses a check that splits a kind, so shaping which mutants a
    pin rejects costs it everything.

    Args:
        name: The file's workspace name (part of the seed and of each label).
        content: The decoded content (already cut to the window).
        seed: ``StrengthConfig.seed``.
        draws: Mutants per kind.
        aimed: The family's mutators for this file (``Reference.mutators``).
        reserve: Further draws of each kind, made after its ``draws`` (so those are the
            same with or without them), for confirmations on mutants a check has not
            seen: labelled ``#draws``, ``#draws+1``, ...; fewer where the edit runs out.

    Yields:
        Lists of ``draws`` mutants (then the reserve draws) labelled
        ``<file>:<kind>#<draw>``; ``kind_of`` reads the kind back.
    """
    if not content:
        return
    binary = b"\0" in content[:8192]
    generic = _BINARY_OPERATORS if binary else (*TEXT_OPERATORS, *RECORD_OPERATORS)
    kinds: list[tuple[str, Callable[[bytes, random.Random], bytes | None]]] = []
    for again in ("", "+"):  # a second round, drawn afresh, where the first ran short
        kinds += [(f"aimed{i}{again}", m) for i, m in enumerate(aimed)]
        kinds += [(f"{op}{again}", _OPERATORS[op]) for op in generic]
    seen = {sha256(content).digest()}
    for label, operator in kinds:
        built: list[Mutant] = []
        _draw(name, label, operator, content, built, seen, n=draws, seed=seed)
        if len(built) == draws:
            if reserve > 0 and not label.startswith("drop_header"):
                _draw(name, label, operator, content, built,
                      {sha256(m.content).digest() for m in built}, n=reserve, seed=seed,
                      tag="reserve")
            yield built
        elif built and label.startswith("aimed") and "+" not in label:
            yield built


def _draw(name: str, label: str, operator: Callable[[bytes, random.Random], bytes | None],
          content: bytes, built: list[Mutant], seen: set[bytes], *, n: int, seed: int,
          tag: str = "") -> None:
    """Append to ``built`` up to ``n`` more draws of one kind (``3n`` attempts), each the
    edit applied again to the draw before (the header drop aside: twice would drop a data
    row), none whose digest is in ``seen`` (which takes theirs)."""
    goal = len(built) + n
    for attempt in range(3 * n):
        if len(built) >= goal:
            break
        compound = bool(built) and not label.startswith("drop_header")
        start = built[-1].content if compound else content
        changed = operator(start, random.Random(f"{seed}|{name}|{label}|{tag}{attempt}"))
        digest = sha256(changed).digest() if changed else b""
        if changed and digest not in seen:
            seen.add(digest)
            built.append(Mutant(f"{name}:{label}#{len(built)}", changed))


def draw_of(label: str) -> int:
    """The draw of a mutant's label (``<file>:<kind>#<draw>``), 0 for a label without one.

    Example:
        >>> draw_of("calls.vcf.gz:aimed0#3")
        3
    """
    tail = label.rpartition("#")[2]
    return int(tail) if tail.isdigit() else 0


def kind_of(label: str) -> str:
    """The kind of mutation of a mutant's label (``<file>:<kind>#<draw>``).

    Example:
        >>> kind_of("calls.vcf.gz:aimed0#1")
        'aimed0'
    """
    return label.rpartition(":")[2].rpartition("#")[0]


def window(content: bytes, max_bytes: int) -> bytes:
    """The first ``max_bytes`` of ``content``, cut back to a line end for text."""
    head = content[:max_bytes]
    if b"\0" in head[:8192]:
        return head
    cut = head.rfind(b"\n")
    return head[:cut + 1] if cut > 0 else head


class _Text:
    """A text file as line spans, so an edit costs what it touches, not the file:
    a mutant is the untouched runs between edited lines joined with the edits."""

    def __init__(self, content: bytes) -> None:
        self.trailing = content.endswith(b"\n")
        self.data = content if self.trailing else content + b"\n"
        ends = np.flatnonzero(np.frombuffer(self.data, dtype=np.uint8) == 10) + 1
        self.ends = ends
        self.starts = np.concatenate((np.zeros(1, dtype=ends.dtype), ends[:-1]))
        self.n = len(ends)

    def line(self, i: int) -> bytes:
        """Line ``i`` with its newline."""
        return self.data[int(self.starts[i]):int(self.ends[i])]

    def build(self, edits: dict[int, list[bytes]]) -> bytes | None:
        """The file with line ``i`` replaced by ``edits[i]`` (``[]`` drops it)."""
        out: list[bytes] = []
        pos = 0
        for i in sorted(edits):
            out.append(self.data[pos:int(self.starts[i])])
            out.extend(edits[i])
            pos = int(self.ends[i])
        out.append(self.data[pos:])
        result = b"".join(out)
        if not self.trailing and result.endswith(b"\n"):
            result = result[:-1]
        return result or None  # never an empty mutant


def _count(total: int, cap: int = _MAX_EDITED_LINES) -> int:
    return min(cap, max(1, round(_SHARE * total)))


def _drop_lines(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    if text.n < 2:
        return None
    drop = rng.sample(range(1, text.n), _count(text.n - 1))
    return text.build({i: [] for i in drop})


def _drop_header(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    if text.n < 2:
        return None
    first = 0  # the column header follows the meta lines (VCF "##", MatrixMarket "%")
    while first < min(text.n - 1, _MAX_META_LINES) and text.line(first).startswith(_META):
        first += 1
    return text.build({first: []})


def _shuffle_rows(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    if text.n < 3:
        return None
    body = text.n - 1
    moved = sorted(rng.sample(range(1, text.n), body if body <= 50 else _count(body)))
    order = moved[:]
    rng.shuffle(order)
    return text.build({i: [text.line(j)] for i, j in zip(moved, order, strict=True)})


def _duplicate_lines(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    twice = rng.sample(range(text.n), _count(text.n))
    return text.build({i: [text.line(i), text.line(i)] for i in twice})


def _edit_chars(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    filled = np.flatnonzero(text.ends - text.starts >= 3)  # two characters and "\n"
    if not len(filled):
        return None
    i = int(filled[rng.randrange(len(filled))])
    line = text.line(i)[:-1]
    span = max(1, len(line) // 10)
    start = rng.randrange(0, len(line) - span + 1)
    return text.build({i: [line[:start] + line[start + span:] + b"\n"]})




def _perturb_numbers(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    sample = rng.sample(range(text.n), min(text.n, _NUMBER_SCAN_LINES))
    numeric = [i for i in sample if _NUMBER.search(text.line(i))]
    if not numeric:
        return None
    if len(numeric) > _PERTURB_ALL_LINES:  # a large file: half its numeric lines
        numeric = numeric[:max(_PERTURB_ALL_LINES, len(numeric) // 2)]
    chosen = numeric[:_MAX_PERTURBED_LINES]
    return text.build({i: [_NUMBER.sub(lambda m: _moved(m.group(), rng), text.line(i))]
                       for i in chosen})


def _moved(token: bytes, rng: random.Random) -> bytes:
    sign = -1 if rng.random() < 0.5 else 1
    share = 0.1 + 0.4 * rng.random()
    digits = token.lstrip(b"+-")
    if digits.isdigit():  # the common case, kept cheap: a mutant moves 10^5 lines
        if len(digits) > _MAX_ARITHMETIC_DIGITS:
            return _edit_digit(token.decode("ascii"), rng).encode()
        whole = int(token)
        return b"%d" % (whole + sign * max(1, round(abs(whole) * share)))
    text = token.decode("ascii")
    mantissa = text.lower().split("e")[0]
    if len(mantissa) > _MAX_ARITHMETIC_DIGITS:
        return _edit_digit(text, rng).encode()
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    value = float(text)
    step = 10.0 ** -decimals
    moved = value + sign * max(abs(value) * share, step)
    if not math.isfinite(moved) or moved == value:
        return _edit_digit(text, rng).encode()  # 1e999, or too large to move by a step
    if "e" in text.lower():
        return f"{moved:.{max(decimals, 1)}e}".encode()
    return f"{moved:.{decimals}f}".encode()


def _edit_digit(text: str, rng: random.Random) -> str:
    """``text`` with one of its digits replaced by another digit."""
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    i = rng.choice(digits)
    return text[:i] + rng.choice([d for d in "0123456789" if d != text[i]]) + text[i + 1:]


def _drop_record(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    if text.n < 3:
        return None
    return text.build({rng.randrange(1, text.n): []})


def _perturb_record(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    numeric = [i for i in rng.sample(range(1, text.n), min(text.n - 1, 200))
               if _NUMBER.search(text.line(i))] if text.n > 1 else []
    if not numeric:
        return None
    i = numeric[0]
    return text.build({i: [_NUMBER.sub(lambda m: _moved(m.group(), rng), text.line(i))]})


def _flip_bytes(content: bytes, rng: random.Random) -> bytes | None:
    data = bytearray(content)
    for i in rng.sample(range(len(data)), _count(len(data) // 10)):
        data[i] ^= rng.randrange(1, 256)
    return bytes(data)


def _truncate_tail(content: bytes, rng: random.Random) -> bytes | None:
    if len(content) < 2:
        return None
    return content[:len(content) - max(1, round(len(content) * rng.uniform(0.05, 0.2)))]


_OPERATORS: dict[str, Callable[[bytes, random.Random], bytes | None]] = {
    "drop_lines": _drop_lines,
    "perturb_numbers": _perturb_numbers,
    "shuffle_rows": _shuffle_rows,
    "drop_header": _drop_header,
    "duplicate_lines": _duplicate_lines,
    "edit_chars": _edit_chars,
    "drop_record": _drop_record,
    "perturb_record": _perturb_record,
    "flip_bytes": _flip_bytes,
    "truncate_tail": _truncate_tail,
}
