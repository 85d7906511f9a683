"""Answer-preserving rewrites of the records a question reads: probes for controls.

Observed by a red team: every mutant edits or drops a record the question reads, while
the controls of ``transforms`` only re-order records, drop *unread* ones, re-wrap lines
or add comments. So anything computed from exactly the read records followed the
answer: the md5 of the sorted values of the asked column earned verification on 23 of
23 task types, the first 64 bytes of the sorted read rows on 13, a hash of the ids of
the read rows on 12 of 13; a codebook read as a byte prefix earned because its only
control appended a note. Only where a family's own control already rewrote the read
records (ids renamed, QUAL re-scored, reads complemented) did such a hash die. A
control has to rewrite the read records themselves and keep the answer:

* ``complement_alleles``: the REF and ALT of about half the VCF's biallelic SNVs
  complemented (``A>G`` written ``T>C``): a transition stays one, so does a
  transversion, and no genotype moves;
* ``transfer_values``: in a table, in every numeric column and every *group* of at
  least eight (records equal in every column of few distinct values: species, arm,
  status, label), ``d`` (a few units of the last decimal) moved between two values of
  the group's top quarter, neither passing its largest value nor falling below the
  quarter: each group's count, sum, mean, minimum, maximum and median are kept, and
  anything decided below its top quarter (a Kaplan-Meier median); its sorted values
  are not. Not the largest value itself: the reference checks the range of what it
  averaged (measured: moving the maximum cost ``real.csv.cancer_mean`` a check);
* ``transfer_largest``: ``d`` moved from each group's largest value to a value above its
  median, of the record most alike (most other fields equal): count, sum, mean, minimum
  and median kept, the maximum not. Only where a
  reference names it, and by default for a program reference (``program``), which
  declares no honest check of a range: on a hand-written task summing one gene's reads,
  a pin of the read column's maximum (a row of that gene) earned 0.021 against the
  reference's 0.062, and no other control moved it;
* ``reformat_numbers``: about half the positive decimals given a leading zero (``38.8``
  -> ``038.8``): CSV/TSV fields and the VCF QUAL. Not ``1.50`` -> ``1.5``: the
  reference sums two-decimal values in hundredths with ``tr -d .``, honest fixed-point
  arithmetic that a changed number of decimals breaks (measured: it cost
  ``tab.label_coding`` a check). Integers stay as they are: a code column (a status
  ``1``, a label ``0``, the ``-999`` sentinel) is compared as a string by honest shell;
* ``permute_values``: every numeric column's values permuted among the records of each
  group: every order-free statistic of a group is kept, every record's fingerprint
  changes;
* ``rename_ids``: a table's id column (named ``id`` or ``*_id``, every value distinct)
  and the VCF ID column rewritten;
* ``respell_fields``: whole columns respelled, one column at a time, each kept only
  where the reference still gives the answer: every distinct value of a table column
  gets another spelling of the same shape (``P017`` -> ``K842``, ``38.8`` -> ``71.3``;
  one spelling per value, so equal values stay equal and distinct ones distinct), a
  VCF's QUAL, its INFO numbers, and each sample's calls (redrawn among the calls it
  has) and numbers. The columns a question never reads -- another sample's calls, a
  CSV's other measurements -- are what it rewrites: a hash of any of them died on no
  control before (measured on a hand-written suite: md5 pins of the other samples'
  FORMAT fields earned as much as the reference, 0.073). Tried a column at a time by
  halving: all columns at once first, and where the answer moves, each half again, so
  a table of 32 columns of which the question reads 2 costs about 12 solver runs;
* ``reword_text``: a prose side file (``.txt``, ``.md``, a README) given a title line
  and its aligned columns re-spaced: a prefix of its bytes changes, its words do not;
* ``swap_homozygous`` (only where a family names it): about half the homozygous VCF
  calls swapped (``0/0`` with ``1/1``): every sample's heterozygous calls are kept, the
  genotypes a het count reads change; a trio's or a frequency's answer would not;
* ``revcomp_records`` (only where a family names it): about half the FASTA records
  reverse-complemented (case kept, wrapped at their width). A GC share keeps; a count
  on both strands and a six-frame ORF keep too, but the reference checks the
  forward-strand count, the ORF's strand and the sites' positions on the way, so it is
  not probed by default (measured: it cost ``seq.motif_count``, ``seq.longest_orf``
  and ``real.fasta.site_count`` checks). Re-phasing genotypes (``0/1`` as ``0|1``) was
  dropped for the same reason: the reference counts phased and unphased calls apart.

Each file gets one such control: the file's declared transforms (re-ordered, unread
records dropped, a comment added) where the reference confirms the answer, then every
rewrite that applies to it on top, each kept only where the reference confirms it. One: the
declared controls keep the other slots, each the death of a fingerprint of its own (a
line count dies on an added comment, not on a rewrite: measured, a whole-file line
count earned when rewrites took half the slots). Greedy, not all or nothing: one
rewrite the answer does not survive (values permuted across the genes of an expression
table) would otherwise cost the file every other rewrite.

None is assumed to keep any answer: each is a *probe*, tried on every file of a task
that has a reference, and kept only where the reference's solver gives the same answer
(a probe the solver contradicts is no family bug and is not reported). A probe can keep
the solver's answer and still move a fact an honest analysis checks on the way (a
per-cell total, a forward-strand count); a family lists the probes worth trying for
such a file in ``Reference.rewriting`` (``()``: none). Columns are never re-ordered: the
reference solutions read tables by position (``awk -F, '$2 == "Adelie" { print $6 }'``),
and a correct positional analysis must keep earning.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable

from vera_env.verification.strength.reference import Reference, RewriteTransform
from vera_env.verification.strength.transforms import (
    apply_control,
    file_format,
    join_records,
    split_records,
)

__all__ = ["apply_rewrite", "compose_rewrites", "probe_rewrites", "rewrite_kept"]

_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?")
_DECIMAL = re.compile(rb"\d+\.\d+")
_HOMS = {b"0/0": b"1/1", b"1/1": b"0/0", b"0|0": b"1|1", b"1|1": b"0|0"}
_SNV = re.compile(rb"[^\t]*\t[^\t]*\t[^\t]*\t[ACGTacgt]\t[ACGTacgt]\t")
_CATEGORIES = 12
"""A column with at most this many distinct values (and at most a quarter as many as
records) is a group key: a species, an arm, a status, a label."""
_PARSED = 0.9
_GROUP = 8
"""The least group ``transfer_values`` edits: its top quarter lies above its median."""
_COMPLEMENT = bytes.maketrans(b"ACGTUMRWSYKVHDBNacgtumrwsykvhdbn",
                              b"TGCAAKYWSRMBDHVNtgcaakywsrmbdhvn")
_TITLES = (b"About these files", b"Notes", b"Data dictionary", b"Read me first")

Table = tuple[bytes, list[bytes], list[list[bytes] | None]]
"""(separator, column names, each record's fields or None where it is no table row)."""


Recipe = tuple[tuple[RewriteTransform, "frozenset[int] | None"], ...]
"""The rewrites one probe kept, in order, each with the parts it kept (None: whole)."""


def probe_rewrites(name: str, content: bytes, reference: Reference,
                   keeps: Callable[[bytes], bool], *, seed: int, draw: int = 0,
                   recipe: Recipe | None = None) -> list[tuple[str, bytes, Recipe]]:
    """(label, content, recipe) of the one control that rewrites a file, or none: the
    file's declared transforms first, where ``keeps`` (the reference: same answer)
    accepts them, then every rewrite that applies, each added only where ``keeps``
    accepts the result. The declared ones first: a program's ``irrelevant`` knows the
    records it probed as the file has them, and after a respelling it found none to
    drop, so the rewritten control kept the file's line count (measured: a gated
    line-count pin earned on two hand-written tasks). One solver run for the declared
    transforms, one per rewrite that applies (more for a rewrite by parts).

    ``draw`` 1, 2, ... with the first draw's ``recipe``: a further draw of that control
    (reserve controls), the same rewrites of the same parts with other random choices,
    each kept where ``keeps`` accepts it. Not a fresh probe: a fresh one could keep a
    rewrite the first rejected (a value transfer the answer survives this time) and move
    a fact an honest check reads on its way, which no control it was shown moved
    (measured: four reference checks of ``tab.fold_change`` failed such a reserve)."""
    rng = random.Random(f"{seed}|{name}|rewrites" + (f"|{draw}" if draw else ""))
    base = content
    for declared in reference.controls_for(name):
        if declared != "recompress":
            base = apply_control(declared, name, base, rng,
                                 reference.irrelevant.get(name)) or base
    if base != content and not keeps(base):
        base = content
    out = base
    kept: list[tuple[RewriteTransform, frozenset[int] | None]] = []
    if recipe is None:
        for transform in reference.rewrites_for(name):
            out = rewrite_kept(transform, name, out, rng, keeps, kept)
    else:
        for transform, parts in recipe:
            changed = apply_rewrite(transform, name, out, rng, parts=parts)
            if changed is not None and keeps(changed):
                out = changed
                kept.append((transform, parts))
    return [] if out == base else [(f"{name}:rewrites#{draw}", out, tuple(kept))]


def rewrite_kept(transform: RewriteTransform, name: str, content: bytes, rng: random.Random,
                 keeps: Callable[[bytes], bool],
                 kept: list[tuple[RewriteTransform, frozenset[int] | None]] | None = None
                 ) -> bytes:
    """``content`` with as much of ``transform`` as ``keeps`` accepts: the whole rewrite
    or nothing, or -- for a rewrite by parts (``respell_fields``: columns) -- the parts
    found by halving: all at once, then each half of a rejected set, down to single
    parts, each accepted on top of what was kept. What it kept is added to ``kept``."""
    parts = _PARTS[transform](name, content) if transform in _PARTS else None
    if parts is None:
        changed = apply_rewrite(transform, name, content, rng)
        if changed is not None and keeps(changed):
            if kept is not None:
                kept.append((transform, None))
            return changed
        return content
    out, pending = content, [parts]
    taken: set[int] = set()
    while pending:
        chunk = pending.pop()
        changed = apply_rewrite(transform, name, out, rng, parts=frozenset(chunk))
        if changed is None:
            continue
        if keeps(changed):
            out = changed
            taken |= set(chunk)
        elif len(chunk) > 1:
            pending += [chunk[len(chunk) // 2:], chunk[:len(chunk) // 2]]
    if taken and kept is not None:
        kept.append((transform, frozenset(taken)))
    return out


def compose_rewrites(transforms: tuple[RewriteTransform, ...], name: str, content: bytes,
                     rng: random.Random) -> bytes | None:
    """``content`` rewritten by every one of ``transforms`` that applies, in turn: one
    control that rewrites everything at once (None if none applies)."""
    out = content
    for transform in transforms:
        out = apply_rewrite(transform, name, out, rng) or out
    return out if out != content else None


def apply_rewrite(transform: RewriteTransform, name: str, content: bytes,
                  rng: random.Random, parts: frozenset[int] | None = None) -> bytes | None:
    """``content`` rewritten by ``transform``, or None when it does not apply or would not
    change the bytes.

    Args:
        transform: One of `vera_env.verification.strength.reference.REWRITE_TRANSFORMS`.
        name: The file's workspace name (its format).
        content: The decoded content.
        rng: Draws (which records, which column, which amount).
        parts: For a rewrite by parts (``respell_fields``), the columns to rewrite
            (None: all of them); ignored by the others.
    """
    if file_format(name) not in _APPLIES[transform]:
        return None  # before splitting: a probe of every file must cost nothing here
    split = split_records(name, content)
    if split is None:
        return None
    header, records = split
    if transform == "respell_fields":
        changed = _respell(name, header, records, rng, parts)
    else:
        changed = _REWRITES[transform](name, header, records, rng)
    return changed if changed is not None and changed != content else None


# ----- tables -----

def _table(name: str, header: bytes, records: list[bytes]) -> Table | None:
    """A CSV/TSV, or None (quoted fields are not split). Its columns are named by the
    first line where that line has as many fields as the records (most of which must
    have the same number); otherwise (a count line, no header) they have no names."""
    if file_format(name) != "text" or not records:
        return None
    line = records[0].rstrip(b"\r\n")
    sep = b"\t" if b"\t" in line else b"," if b"," in line else None
    if sep is None:
        return None
    width = len(line.split(sep))
    rows: list[list[bytes] | None] = []
    for record in records:
        fields = record.rstrip(b"\r\n").split(sep)
        rows.append(fields if len(fields) == width and b'"' not in record else None)
    if sum(r is not None for r in rows) < _PARSED * len(rows):
        return None
    names = header.rstrip(b"\r\n").split(sep)
    return sep, names if len(names) == width else [b""] * width, rows


def _rows_back(records: list[bytes], sep: bytes, rows: list[list[bytes] | None],
               changed: set[int]) -> list[bytes]:
    out = records[:]
    for i in changed:
        row = rows[i]
        assert row is not None
        out[i] = sep.join(row) + records[i][len(records[i].rstrip(b"\r\n")):]
    return out


def _is_id(name: bytes) -> bool:
    lower = name.strip().lower()
    return lower == b"id" or lower.endswith((b"_id", b" id"))


def _layout(names: list[bytes], rows: list[list[bytes] | None]) -> tuple[list[int], list[int]]:
    """(group key columns, numeric measure columns) of a table."""
    present = [r for r in rows if r is not None]
    keys, measures = [], []
    for c, name in enumerate(names):
        values = [r[c] for r in present]
        distinct = len(set(values))
        if distinct <= min(_CATEGORIES, max(2, len(values) // 4)):
            keys.append(c)
        elif not _is_id(name) and sum(bool(_NUMBER.fullmatch(v)) for v in values) \
                >= _PARSED * len(values):
            measures.append(c)
    return keys, measures


def _groups(rows: list[list[bytes] | None], keys: list[int], column: int
            ) -> list[list[int]]:
    """Record indices with a number in ``column``, by group (equal key columns)."""
    by: dict[tuple[bytes, ...], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if row is not None and _NUMBER.fullmatch(row[column]):
            by[tuple(row[k] for k in keys)].append(i)
    return list(by.values())


def _decimals(text: bytes) -> int:
    point = text.find(b".")
    return 0 if point < 0 else len(text) - point - 1


def _transfer(name: str, header: bytes, records: list[bytes], rng: random.Random
              ) -> bytes | None:
    return _edit_groups(name, header, records, rng, _move_inner, least=_GROUP)


def _edit_groups(name: str, header: bytes, records: list[bytes], rng: random.Random,
                 edit: Callable[[list[list[bytes] | None], list[int], int, random.Random],
                                Iterable[int]], least: int = 1) -> bytes | None:
    """``edit`` applied to each measure column within each group of alike records (of at
    least ``least``); the file again with the records it changed, None if none."""
    table = _table(name, header, records)
    if table is None:
        return None
    sep, names, rows = table
    keys, measures = _layout(names, rows)
    changed: set[int] = set()
    for column in measures:
        for group in _groups(rows, keys, column):
            if len(group) >= least:
                changed.update(edit(rows, group, column, rng))
    return join_records(header, _rows_back(records, sep, rows, changed)) if changed else None


def _move_inner(rows: list[list[bytes] | None], group: list[int], column: int,
                rng: random.Random) -> tuple[int, ...]:
    """A few units of the last decimal moved between two values of the group's top
    quarter, its largest value excepted: neither passes the largest nor falls below the
    quarter's edge, so the minimum, the maximum and every value from the quarter down
    (the median) stay. The records changed; none if there is no room (ties)."""
    order = sorted(group, key=lambda i: float(rows[i][column]), reverse=True)  # type: ignore[index]
    q = len(order) // 4
    texts = [rows[i][column] for i in order[:q + 2]]  # type: ignore[index]
    places = max(_decimals(t) for t in texts[1:q + 1])
    scaled = [round(float(t) * 10**places) for t in texts]
    d = rng.randint(1, 3)
    up = [i for i in range(1, q + 1) if scaled[i] + d <= scaled[0]]
    down = [j for j in range(1, q + 1) if scaled[j] - d >= scaled[q + 1]]
    pairs = [(i, j) for i in up for j in down if i != j]
    if not pairs:
        return ()
    i, j = rng.choice(pairs)
    rows[order[i]][column] = _scaled(scaled[i] + d, places)  # type: ignore[index]
    rows[order[j]][column] = _scaled(scaled[j] - d, places)  # type: ignore[index]
    return order[i], order[j]


def _transfer_largest(name: str, header: bytes, records: list[bytes], rng: random.Random
                       ) -> bytes | None:
    return _edit_groups(name, header, records, rng, _move_largest, least=_GROUP)


def _move_largest(rows: list[list[bytes] | None], group: list[int], column: int,
                  rng: random.Random) -> tuple[int, ...]:
    """A few units of the last decimal moved from the group's largest value to a value
    above its median, of the record most alike the largest's (the most other fields
    equal: a question that selects rows by a field -- a gene among many, too many to be
    a group -- keeps its sum only where both records are selected), neither passing the
    other: the count, sum, mean, minimum and median stay, the maximum moves. The records
    changed; none if there is no room (a tie at the top)."""
    order = sorted(group, key=lambda i: float(rows[i][column]), reverse=True)  # type: ignore[index]
    texts = [rows[i][column] for i in order]  # type: ignore[index]
    places = max(_decimals(t) for t in texts)
    scaled = [round(float(t) * 10**places) for t in texts]
    d = rng.randint(1, 3)
    middle = scaled[len(order) // 2]
    room = [k for k in range(1, len(order)) if middle < scaled[k] and scaled[k] + d < scaled[0] - d]
    if not room or scaled[1] == scaled[0]:
        return ()
    top = rows[order[0]]
    assert top is not None

    def alike(k: int) -> int:
        row = rows[order[k]]
        assert row is not None
        return sum(a == b for c, (a, b) in enumerate(zip(row, top, strict=False)) if c != column)

    best = max(alike(k) for k in room)
    k = rng.choice([k for k in room if alike(k) == best])
    top[column] = _scaled(scaled[0] - d, places)
    rows[order[k]][column] = _scaled(scaled[k] + d, places)  # type: ignore[index]
    return order[0], order[k]


def _scaled(value: int, places: int) -> bytes:
    """``value / 10**places`` written with ``places`` decimals, exactly."""
    if places == 0:
        return str(value).encode()
    sign, digits = ("-" if value < 0 else ""), str(abs(value)).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}".encode()


def _permute(name: str, header: bytes, records: list[bytes], rng: random.Random
             ) -> bytes | None:
    return _edit_groups(name, header, records, rng, _shuffle_group)


def _shuffle_group(rows: list[list[bytes] | None], group: list[int], column: int,
                   rng: random.Random) -> list[int]:
    """The group's values of ``column`` shuffled among its records; those changed."""
    values = [rows[i][column] for i in group]  # type: ignore[index]
    rng.shuffle(values)
    changed = []
    for i, value in zip(group, values, strict=True):
        row = rows[i]
        assert row is not None
        if row[column] != value:
            row[column] = value
            changed.append(i)
    return changed


def _reformat(name: str, header: bytes, records: list[bytes], rng: random.Random
              ) -> bytes | None:
    fmt = file_format(name)
    if fmt == "vcf":
        out = [_edit_fields(r, b"\t", lambda c, f: _padded(f) if c == 5 and rng.random() < 0.5
                            else f) for r in records]
        return join_records(header, out)
    table = _table(name, header, records)
    if table is None:
        return None
    sep, _, rows = table
    changed: set[int] = set()
    for i, row in enumerate(rows):
        for c, value in enumerate(row or ()):
            if rng.random() < 0.5 and (new := _padded(value)) != value:
                row[c] = new  # type: ignore[index]
                changed.add(i)
    return join_records(header, _rows_back(records, sep, rows, changed)) if changed else None


def _padded(field: bytes) -> bytes:
    """A positive decimal with a leading zero (``38.8`` -> ``038.8``); anything else
    unchanged. Not a trailing zero: honest shell sums hundredths with ``tr -d .``."""
    return b"0" + field if _DECIMAL.fullmatch(field) and not field.startswith(b"-") else field


def _edit_fields(record: bytes, sep: bytes, edit: Callable[[int, bytes], bytes]) -> bytes:
    body = record.rstrip(b"\r\n")
    return sep.join(edit(c, f) for c, f in enumerate(body.split(sep))) + record[len(body):]


def _rename_ids(name: str, header: bytes, records: list[bytes], rng: random.Random
                ) -> bytes | None:
    if file_format(name) == "vcf":
        fresh = iter(rng.sample(range(10**6, 10**8), len(records)))
        return join_records(header, [_edit_fields(
            r, b"\t", lambda c, f: b"rs%d" % next(fresh) if c == 2 else f) for r in records])
    table = _table(name, header, records)
    if table is None:
        return None
    sep, names, rows = table
    present = [r for r in rows if r is not None]
    for c, column in enumerate(names):
        values = [r[c] for r in present]
        if not _is_id(column) or len(set(values)) != len(values):
            continue
        prefix = re.match(rb"\D*", values[0]).group() if values else b""  # type: ignore[union-attr]
        # One to three digits longer, drawn: each draw moves the file's digit and byte
        # counts by its own amount (a fixed width moved them alike on every draw, and a
        # pin gated on such a count passed every further draw for free: ``fingerprints``).
        width = max(len(v) - len(prefix) for v in values) + rng.randint(0, 2)
        draws = iter(rng.sample(range(10 ** width, 10 ** (width + 1)), len(values)))
        for row in present:
            row[c] = prefix + str(next(draws)).encode()
        changed = {i for i, r in enumerate(rows) if r is not None}
        return join_records(header, _rows_back(records, sep, rows, changed))
    return None


# ----- respelling whole columns -----

_VCF_FIXED = 9
"""A VCF's fixed columns: CHROM POS ID REF ALT QUAL FILTER INFO FORMAT."""
_VCF_QUAL, _VCF_INFO = 5, 7
_MAX_PARTS = 64
_DIGITS_OR_POINT = frozenset(bytes([c]) for c in b"0123456789.")


def _columns(name: str, content: bytes) -> list[int] | None:
    """The parts ``respell_fields`` may rewrite (None: the file is neither a table nor a
    VCF): a table's columns by index; for a VCF, ``2c`` is column ``c``'s value (a
    sample's call, QUAL, INFO) and ``2c + 1`` a sample's numbers after its call, apart:
    the asked sample's depths are read by no question that reads its calls."""
    if file_format(name) not in ("text", "vcf"):
        return None
    split = split_records(name, content)
    if split is None or not split[1]:
        return None
    header, records = split
    if file_format(name) == "vcf":
        width = len(records[0].rstrip(b"\r\n").split(b"\t"))
        samples = [part for c in range(_VCF_FIXED, width) for part in (2 * c, 2 * c + 1)]
        return [2 * _VCF_QUAL, 2 * _VCF_INFO, *samples][:_MAX_PARTS]
    table = _table(name, header, records)
    return None if table is None else list(range(len(table[1])))[:_MAX_PARTS]


def _respell(name: str, header: bytes, records: list[bytes], rng: random.Random,
             parts: frozenset[int] | None) -> bytes | None:
    if file_format(name) == "vcf":
        return _respell_vcf(header, records, rng, parts)
    table = _table(name, header, records)
    if table is None:
        return None
    sep, names, rows = table
    changed: set[int] = set()
    for c in range(len(names)):
        if parts is not None and c not in parts:
            continue
        spelled: dict[bytes, bytes] = {}
        taken = {row[c] for row in rows if row is not None}
        for i, row in enumerate(rows):
            if row is None:
                continue
            if row[c] not in spelled:
                spelled[row[c]] = _fresh(row[c], taken, rng)
            if spelled[row[c]] != row[c]:
                row[c] = spelled[row[c]]
                changed.add(i)
    return join_records(header, _rows_back(records, sep, rows, changed)) if changed else None


def _fresh(value: bytes, taken: set[bytes], rng: random.Random, letters: bool = True) -> bytes:
    """Another spelling of ``value`` no value of its column has: of its shape, or, where
    the column holds nearly every spelling of that shape (depths 10 to 99), one digit
    or letter longer; ``value`` itself only when it has no digit or letter to vary."""
    for attempt in range(24):
        longer = attempt >= 16 and value and value[-1:].isalnum()
        new = _spelled(value + value[-1:] if longer else value, rng, letters)
        if new not in taken:
            taken.add(new)
            return new
    return value


def _spelled(value: bytes, rng: random.Random, letters: bool = True) -> bytes:
    """``value`` with each digit and (``letters``) letter redrawn within its class and
    case. A number keeps its shape: a run's leading digit stays non-zero, and a leading
    zero before more digits or a point stays a zero (``038.8`` stays zero-padded,
    ``0.42`` below one). A lone ``0`` is a code like any other digit: kept, the
    respelled column of a 0/1 label rewrote only its ones, and an honest check of the
    other class died on that control (measured on ``tab.label_coding``)."""
    out = bytearray(value)
    for i, ch in enumerate(value):
        if 48 <= ch <= 57:
            lead = i == 0 or not 48 <= value[i - 1] <= 57
            padding = lead and ch == 48 and value[i + 1:i + 2] in _DIGITS_OR_POINT
            out[i] = ch if padding else rng.randint(49 if lead else 48, 57)
        elif letters and 97 <= ch <= 122:
            out[i] = rng.randint(97, 122)
        elif letters and 65 <= ch <= 90:
            out[i] = rng.randint(65, 90)
    return bytes(out)


def _respell_vcf(header: bytes, records: list[bytes], rng: random.Random,
                 parts: frozenset[int] | None) -> bytes | None:
    rows = [r.rstrip(b"\r\n").split(b"\t") for r in records]
    width = len(rows[0])
    sites = [i for i, row in enumerate(rows)
             if len(row) == width and row[0] and not row[0].startswith(b"#")]
    spell = _Speller(rng, [rows[i] for i in sites])
    out = records[:]
    for i in sites:
        row = rows[i]
        new = [_respell_vcf_field(c, f, spell, parts) for c, f in enumerate(row)]
        if new != row:
            out[i] = b"\t".join(new) + records[i][len(records[i].rstrip(b"\r\n")):]
    return join_records(header, out)


class _Speller:
    """One new spelling per value of a VCF column's part, none an old value of that part
    (as a table's columns are respelled): so the smallest and largest value of a part
    change too, where a spelling drawn afresh per site gave the smallest depth,
    ``DP=10``, back again (measured: its sorted first line earned as a slice)."""

    def __init__(self, rng: random.Random, rows: list[list[bytes]]) -> None:
        self.rng = rng
        self._taken: dict[tuple[int, bool], set[bytes]] = defaultdict(set)
        self._spelled: dict[tuple[int, bool], dict[bytes, bytes]] = defaultdict(dict)
        self.calls: dict[int, list[bytes]] = {}
        for row in rows:
            for c, field in enumerate(row):
                gt, _, rest = field.partition(b":")
                self._taken[c, False].add(field if c < _VCF_FIXED else gt)
                self._taken[c, True].add(rest)
        for c in range(_VCF_FIXED, len(rows[0]) if rows else 0):
            self.calls[c] = sorted({row[c].partition(b":")[0] for row in rows}
                                   - {b".", b"./.", b".|."})

    def __call__(self, column: int, value: bytes, numbers: bool, letters: bool) -> bytes:
        key = (column, numbers)
        memo = self._spelled[key]
        if value not in memo:
            memo[value] = _fresh(value, self._taken[key], self.rng, letters)
        return memo[value]


def _respell_vcf_field(column: int, field: bytes, spell: _Speller,
                       parts: frozenset[int] | None) -> bytes:
    """A VCF field with its parts in ``parts`` respelled (see ``_columns``): QUAL's
    digits, INFO's numbers (its keys kept), a sample's call (redrawn among the calls
    that sample has; a missing one stays missing), the numbers after it. Not REF and
    ALT: re-cased bases keep a solver's answer, but an honest ``$4 ~ /^[ACGT]$/`` then
    drops them (measured: the analyst teacher's Ts/Tv checks died on that control)."""
    value, numbers = (parts is None or 2 * column in parts,
                      parts is None or 2 * column + 1 in parts)
    if column == _VCF_QUAL:
        return spell(column, field, False, True) if value and field != b"." else field
    if column == _VCF_INFO:
        return spell(column, field, False, False) if value else field
    if column < _VCF_FIXED:
        return field
    gt, colon, rest = field.partition(b":")
    calls = spell.calls.get(column, [])
    if value and calls and gt not in (b".", b"./.", b".|."):
        gt = spell.rng.choice(calls)
    return gt + colon + (spell(column, rest, True, False) if numbers and rest else rest)


# ----- VCF, FASTA, prose -----

def _complement(name: str, header: bytes, records: list[bytes], rng: random.Random
                ) -> bytes | None:
    if file_format(name) != "vcf":
        return None

    def allele(c: int, field: bytes) -> bytes:
        return field.translate(_COMPLEMENT) if c in (3, 4) else field
    out = [_edit_fields(r, b"\t", allele) if _SNV.match(r) and rng.random() < 0.5 else r
           for r in records]
    return join_records(header, out)


def _swap_homs(name: str, header: bytes, records: list[bytes], rng: random.Random
               ) -> bytes | None:
    if file_format(name) != "vcf":
        return None

    def call(c: int, field: bytes) -> bytes:
        gt, colon, rest = field.partition(b":")
        if c < 9 or gt not in _HOMS or rng.random() >= 0.5:
            return field
        return _HOMS[gt] + colon + rest
    return join_records(header, [_edit_fields(r, b"\t", call) for r in records])


def _revcomp(name: str, header: bytes, records: list[bytes], rng: random.Random
             ) -> bytes | None:
    if file_format(name) != "fasta" or not records:
        return None
    chosen = {i for i in range(len(records)) if rng.random() < 0.5} or {
        rng.randrange(len(records))}
    out = records[:]
    for i in chosen:
        title, _, body = records[i].partition(b"\n")
        lines = body.splitlines()
        width = max((len(line) for line in lines), default=0)
        seq = b"".join(lines).translate(_COMPLEMENT)[::-1]
        if not width:
            continue
        out[i] = title + b"\n" + b"".join(seq[j:j + width] + b"\n"
                                          for j in range(0, len(seq), width))
    return join_records(header, out)


def _reword(name: str, header: bytes, records: list[bytes], rng: random.Random
            ) -> bytes | None:
    base = name.lower().rsplit("/", 1)[-1]
    if file_format(name) != "text" or not (base.endswith((".txt", ".md"))
                                          or base.startswith("readme")):
        return None
    lines = [header, *records]
    respaced = [re.sub(rb"(?<=\S) {2,}(?=\S)", lambda m: b" " * rng.choice(
        (2, 3, len(m.group()) + 1)), line) for line in lines]
    return b"".join([rng.choice(_TITLES) + b"\n\n", *respaced])


_REWRITES: dict[str, Callable[[str, bytes, list[bytes], random.Random], bytes | None]] = {
    "complement_alleles": _complement,
    "revcomp_records": _revcomp,
    "swap_homozygous": _swap_homs,
    "transfer_values": _transfer,
    "transfer_largest": _transfer_largest,
    "reformat_numbers": _reformat,
    "permute_values": _permute,
    "rename_ids": _rename_ids,
    "reword_text": _reword,
}
_PARTS: dict[str, Callable[[str, bytes], list[int] | None]] = {"respell_fields": _columns}
_APPLIES: dict[str, tuple[str, ...]] = {
    "complement_alleles": ("vcf",), "swap_homozygous": ("vcf",), "revcomp_records": ("fasta",),
    "transfer_values": ("text",), "transfer_largest": ("text",), "permute_values": ("text",),
    "reword_text": ("text",),
    "reformat_numbers": ("text", "vcf"), "rename_ids": ("text", "vcf"),
    "respell_fields": ("text", "vcf"),
}
