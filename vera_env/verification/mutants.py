"""Mutants of a data file: the same kind of file with different content.

Strength testing (``vera_env.verification.strength``) re-runs a passing check against these. A check
that passes on every mutant of the data it reads does not depend on that data
(``echo True``, ``test -f qc.mtx``) and earns nothing. So a mutant must change what a
real check looks at — values, rows, order, the header — and keep what a vacuous check
looks at: the file exists, has the same name and kind (a ``.gz`` stays valid gzip) and
is **never emptied**. An emptied file would "kill" ``test -s x`` and ``grep -q . x``,
which read no value at all.

Text files are mutated by lines, one operator per mutant in turn:

* ``drop_lines``: about a tenth of the lines after the first removed (at least one);
* ``perturb_numbers``: every number on about a tenth of the lines that hold numbers
  moved by 10-50 % (at least one unit of its last digit), up or down at random;
* ``shuffle_rows``: the lines after the first put in random order;
* ``drop_header``: the first line removed.

An operator that cannot change a file (shuffling one line) or repeats an earlier
mutant falls back to ``duplicate_lines`` (about a tenth of the lines repeated), then
``edit_chars`` (a run of about a tenth of one line's characters deleted: a sequence on
one line has no other content to change), then the others with a fresh draw. Binary files get ``flip_bytes`` and ``truncate_tail``.
gzip, bzip2 and xz files are decompressed, mutated and recompressed at the fastest
level. A file larger than the window (``max_bytes`` after decompression) is judged on
its window: mutants mutate the first ``max_bytes`` (to a line end) and drop the rest,
and the controls show that window unmutated. That bounds the memory, disk and time
strength costs whatever the model leaves in the workspace; a check whose verdict
depends on data past the window then fails its controls and earns nothing.

Everything is drawn from ``random.Random`` seeded with (seed, file name, mutant index,
attempt), so the mutants — and the verdicts on them — are reproducible.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256
from typing import Any

import numpy as np

__all__ = ["TEXT_OPERATORS", "Mutant", "MutantSet", "MutantSource", "mutate"]

TEXT_OPERATORS: tuple[str, ...] = ("drop_lines", "perturb_numbers", "shuffle_rows",
                                   "drop_header")
_TEXT_FALLBACKS: tuple[str, ...] = ("duplicate_lines", "edit_chars", "perturb_numbers",
                                    "drop_lines", "shuffle_rows")
_BINARY_OPERATORS: tuple[str, ...] = ("flip_bytes", "truncate_tail")
_SHARE = 0.1
# Edits per mutant are capped so a mutant of a million-line file costs milliseconds
# (a changed sum, count or order is as visible in 10^4 lines as in 10^5).
_MAX_EDITED_LINES = 100_000
_MAX_PERTURBED_LINES = 10_000
_NUMBER_SCAN_LINES = 50_000
_NUMBER = re.compile(rb"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutated version of a file.

    Attributes:
        label: ``<file>:<operator>#<index>``, e.g. ``values.txt:drop_lines#0``.
        content: The bytes to show in the file's place (recompressed if it was).
    """

    label: str
    content: bytes


@dataclass(frozen=True, slots=True)
class MutantSet:
    """The mutants of one file and the bytes a control run shows.

    Attributes:
        control: The file itself, or — when it exceeds the window — its window,
            re-encoded, so controls and mutants are judged on the same data.
        windowed: The file was larger than the window.
        mutants: Distinct mutants, fewer than asked when the file allows no more.
    """

    control: bytes
    windowed: bool
    mutants: tuple[Mutant, ...]


@dataclass(frozen=True, slots=True)
class _Codec:
    name: str
    magic: bytes
    decompressor: Callable[[], Any]
    compress: Callable[[bytes], bytes]


_CODECS: tuple[_Codec, ...] = (
    _Codec("gzip", b"\x1f\x8b", lambda: zlib.decompressobj(wbits=31),
           lambda b: gzip.compress(b, compresslevel=1, mtime=0)),
    _Codec("bzip2", b"BZh", bz2.BZ2Decompressor, lambda b: bz2.compress(b, 1)),
    _Codec("xz", b"\xfd7zXZ\x00", lzma.LZMADecompressor,
           lambda b: lzma.compress(b, preset=0)),
)


class MutantSource:
    """The mutants of one file, built on demand: testing usually stops at the first
    mutant that kills the check, and a mutant of a large file costs a recompression.

    Args:
        name: The file's workspace name (part of the seed and of each label).
        raw: The file's stored bytes, or its first ``max_bytes + 1`` of them.
        complete: ``raw`` is the whole file.
        n: Mutants wanted.
        seed: ``RewardConfig.strength_seed``.
        max_bytes: The window: content beyond it is dropped (see the module docstring).
    """

    def __init__(self, name: str, raw: bytes, *, complete: bool, n: int, seed: int,
                 max_bytes: int) -> None:
        codec, content = _decode(raw, max_bytes)
        self.windowed = not complete or len(content) > max_bytes
        if self.windowed:
            content = _window(content, max_bytes)
        self._raw = raw
        self._name, self._n, self._seed = name, n, seed
        self._codec, self._content = codec, content
        binary = b"\0" in content[:8192]
        self._primary = _BINARY_OPERATORS if binary else TEXT_OPERATORS
        self._fallbacks = _BINARY_OPERATORS if binary else _TEXT_FALLBACKS
        self._seen = {sha256(content).digest()}
        self._built: list[Mutant] = []
        self._index = 0

    @property
    def control(self) -> bytes:
        """What a control run shows: the file itself, or — when it exceeds the window —
        its window re-encoded, so controls and mutants are judged on the same data."""
        if not self.windowed:
            return self._raw
        return self._codec.compress(self._content) if self._codec else self._content

    def get(self, i: int) -> Mutant | None:
        """Mutant ``i`` (0-based), or None when the file allows no more."""
        while len(self._built) <= i and self._index < self._n and self._content:
            self._build(self._index)
            self._index += 1
        return self._built[i] if i < len(self._built) else None

    def all(self) -> list[Mutant]:
        """Every mutant (up to ``n``)."""
        self.get(self._n - 1)
        return list(self._built)

    def _build(self, index: int) -> None:
        candidates = (self._primary[index % len(self._primary)], *self._fallbacks)
        for attempt, operator in enumerate(candidates):
            rng = random.Random(f"{self._seed}|{self._name}|{index}|{attempt}")
            changed = _OPERATORS[operator](self._content, rng)
            if not changed:
                continue
            digest = sha256(changed).digest()
            if digest in self._seen:
                continue
            self._seen.add(digest)
            encoded = self._codec.compress(changed) if self._codec else changed
            self._built.append(Mutant(f"{self._name}:{operator}#{index}", encoded))
            return


def mutate(name: str, raw: bytes, *, complete: bool, n: int, seed: int,
           max_bytes: int) -> MutantSet:
    """Build up to ``n`` distinct mutants of one file at once (see ``MutantSource``)."""
    source = MutantSource(name, raw, complete=complete, n=n, seed=seed, max_bytes=max_bytes)
    return MutantSet(source.control, source.windowed, tuple(source.all()))


def _decode(raw: bytes, max_bytes: int) -> tuple[_Codec | None, bytes]:
    """Decompress at most ``max_bytes + 1`` bytes (a truncated stream yields its
    prefix); bytes that only look compressed are mutated as they are."""
    for codec in _CODECS:
        if not raw.startswith(codec.magic):
            continue
        out: list[bytes] = []
        size, data = 0, raw
        try:
            while data and size <= max_bytes:
                decoder = codec.decompressor()
                chunk = decoder.decompress(data, max_bytes + 1 - size)
                out.append(chunk)
                size += len(chunk)
                if not decoder.eof:
                    break  # window filled, or the input was cut short
                data = decoder.unused_data  # another member or stream follows
                if not data.startswith(codec.magic):
                    break
        except (OSError, EOFError, lzma.LZMAError, zlib.error):
            return None, raw
        return codec, b"".join(out)
    return None, raw


def _window(content: bytes, max_bytes: int) -> bytes:
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
    return text.build({0: []}) if text.n >= 2 else None


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


_MAX_INT_DIGITS = 4000  # below sys.get_int_max_str_digits() (4300); found by the turn fuzzer


def _perturb_numbers(content: bytes, rng: random.Random) -> bytes | None:
    text = _Text(content)
    sample = rng.sample(range(text.n), min(text.n, _NUMBER_SCAN_LINES))
    numeric = [i for i in sample if _NUMBER.search(text.line(i))]
    if not numeric:
        return None
    estimate = len(numeric) * text.n // len(sample)
    chosen = numeric[:min(len(numeric), _count(estimate, _MAX_PERTURBED_LINES))]
    return text.build({i: [_NUMBER.sub(lambda m: _moved(m.group(), rng), text.line(i))]
                       for i in chosen})


def _moved(token: bytes, rng: random.Random) -> bytes:
    if len(token) > _MAX_INT_DIGITS:  # int() refuses longer strings: move the leading digits
        return _moved(token[:18], rng) + token[18:]
    text = token.decode("ascii")
    sign = rng.choice((-1, 1))
    share = rng.uniform(0.1, 0.5)
    if re.fullmatch(r"[-+]?\d+", text):
        value = int(text)
        return str(value + sign * max(1, round(abs(value) * share))).encode()
    mantissa = text.lower().split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    value = float(text)
    step = 10.0 ** -decimals
    moved = value + sign * max(abs(value) * share, step)
    if "e" in text.lower():
        return f"{moved:.{max(decimals, 1)}e}".encode()
    return f"{moved:.{decimals}f}".encode()


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
    "flip_bytes": _flip_bytes,
    "truncate_tail": _truncate_tail,
}
