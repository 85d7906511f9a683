"""Real alignments (BAM): PCR duplicates among ChIP-seq control reads.

Why this trap. Whether a read is a duplicate is a fact about the reads -- same strand,
same 5' end -- and FLAG bit 1024 only records it *if a duplicate marker was run*. This
file was made by ``bedToBam`` and never marked: ``samtools flagstat`` reports
"0 + 0 duplicates" and ``samtools view -c -f 1024`` prints 0, while 690 of its 10,000
reads repeat another read's start. The careless analysis trusts the flag. The careful
one computes 5' ends: for a reverse-strand read (FLAG bit 16) that is its *rightmost*
aligned base, ``POS + aligned length - 1``, not ``POS``. ``samtools`` is in the sandbox
(the install step adds it); FLAG is tested with arithmetic, not gawk's ``and()``, so the
solutions also run under mawk.

The answer is computed from the binary BAM by a reader here (BGZF is gzip members; the
record layout is the SAM specification's), independent of samtools, which the tests use
as the second route.
"""

from __future__ import annotations

import gzip
import random
import struct
from collections import Counter
from collections.abc import Iterator, Mapping
from functools import partial
from typing import NamedTuple

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn
from vera_env.tasks.real.kinds import (
    Probe,
    RealInstance,
    careless_trap,
    content_of,
    python_check,
    recounted,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import Contents, Mutator, Reference

__all__ = ["Alignment", "duplicates", "marked_duplicates", "parse_bam", "read_bam",
           "unique_reads"]

_FILE = "control.bam"
_REF_CONSUMING = frozenset({0, 2, 3, 7, 8})  # M, D, N, =, X


class Alignment(NamedTuple):
    """The fields of one BAM record the tasks use (``pos`` 1-based, like SAM)."""

    name: str
    flag: int
    chrom: str
    pos: int
    ref_length: int


def read_bam(data: bytes) -> tuple[list[str], list[Alignment]]:
    """Reference names and records of a BAM file (BGZF-compressed).

    Raises:
        ValueError: Not a BAM file (wrong magic, a cut or malformed record).
    """
    return parse_bam(gzip.decompress(data))


def parse_bam(raw: bytes) -> tuple[list[str], list[Alignment]]:
    """Reference names and records of an *uncompressed* BAM stream (what strength decodes
    a ``.bam`` to: its BGZF blocks are gzip members).

    Raises:
        ValueError: Not a BAM stream (wrong magic, a cut or malformed record).
    """
    refs, located = _scan(raw)
    return refs, [alignment for _, alignment in located]


def _scan(raw: bytes) -> tuple[list[str], list[tuple[int, Alignment]]]:
    """Reference names, and every record with its offset in ``raw``."""
    if raw[:4] != b"BAM\x01":
        raise ValueError("not a BAM file")
    try:
        (l_text,) = struct.unpack_from("<i", raw, 4)
        pos = 8 + l_text
        (n_ref,) = struct.unpack_from("<i", raw, pos)
        pos += 4
        refs = []
        for _ in range(n_ref):
            (l_name,) = struct.unpack_from("<i", raw, pos)
            refs.append(raw[pos + 4:pos + 4 + l_name - 1].decode())
            pos += 4 + l_name + 4
        return refs, list(_records(raw, pos, refs))
    except (struct.error, IndexError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"malformed BAM: {exc}") from exc


def _records(raw: bytes, pos: int, refs: list[str]) -> Iterator[tuple[int, Alignment]]:
    while pos < len(raw):
        (size, ref_id, start, l_name, _mapq, _bin, n_cigar, flag, _l_seq) = struct.unpack_from(
            "<iiiBBHHHi", raw, pos)
        if size < 32 or pos + 4 + size > len(raw):
            raise ValueError(f"BAM record at byte {pos}: {size} bytes does not fit")
        body = pos + 4 + 32
        name = raw[body:body + l_name - 1].decode()
        cigar = struct.unpack_from(f"<{n_cigar}I", raw, body + l_name)
        length = sum(op >> 4 for op in cigar if op & 0xF in _REF_CONSUMING)
        yield pos, Alignment(name, flag, refs[ref_id] if ref_id >= 0 else "*", start + 1, length)
        pos += 4 + size


def _key(r: Alignment) -> tuple[bool, int]:
    """(reverse strand, 5' end): what makes two reads duplicates."""
    return bool(r.flag & 16), r.pos + r.ref_length - 1 if r.flag & 16 else r.pos


def unique_reads(reads: list[Alignment], chrom: str) -> int:
    """Reads left on ``chrom`` after keeping one per (strand, 5' end)."""
    keys = {_key(r) for r in reads if r.chrom == chrom and not r.flag & 4}
    return len(keys)


def marked_duplicates(reads: list[Alignment], chrom: str) -> int:
    """The careless count: reads with FLAG bit 1024 (duplicate) set."""
    return sum(1 for r in reads if r.chrom == chrom and r.flag & 1024)


def _question(chrom: str) -> str:
    return with_clause(
        f"{_FILE} holds single-end ChIP-seq control reads aligned to hg19. Reads on the same "
        "strand whose 5' ends fall on the same base of the same chromosome are PCR duplicates "
        "of each other. How many reads on " + chrom + " are duplicates, that is, reads left "
        "over when one read of each such set is kept? Answer with one integer.")


_ENDS = ("awk -F'\\t' '{ n = 0; c = $6; while (match(c, /^[0-9]+[MIDNSHP=X]/)) { l = substr(c, "
         "1, RLENGTH - 1); op = substr(c, RLENGTH, 1); if (op ~ /[MDN=X]/) n += l; c = substr(c, "
         "RLENGTH + 1) } rev = int($2 / 16) % 2; print (rev ? \"-\" : \"+\") \"\\t\" (rev ? $4 + "
         "n - 1 : $4) }' reads.sam > ends.tsv\nwc -l < ends.tsv\nsort -u ends.tsv | wc -l\n"
         "sort ends.tsv | uniq -d | head -3")
_PY = ("samtools view @F@ | python3 -c \"import sys, re; r = [x for x in (l.split('\\t') for l in "
       "sys.stdin) if x[2] == '@C@']; e = [(int(x[1]) & 16, int(x[3]) + sum(int(k) for k, op in "
       "re.findall(r'(\\d+)([MIDNSHP=X])', x[5]) if op in 'MDN=X') - 1 if int(x[1]) & 16 else "
       "int(x[3])) for x in r]; ")
"""The chromosome's reads ``r`` and their (strand, 5' end) keys ``e``, from the BAM by
samtools and python: the second route of the checks on the model's awk files."""


def _flagged(chrom: str, flag: int) -> str:
    """The BAM's reads on ``chrom`` with FLAG ``flag``, counted by samtools."""
    return f"samtools view {_FILE} | awk -F'\\t' '$3 == \"{chrom}\" && $2 == {flag}' | wc -l"


def _solution(chrom: str, n: int, reverse: int, distinct: int, starts: int
              ) -> tuple[str, ...]:
    """Pull the chromosome's reads, compute each one's strand and 5' end, count the
    reads left over once one read per (strand, 5' end) is kept.

    The checks recount from the BAM what the count is built from: the reads, those on
    the reverse strand, where they start, one 5' end per read, the distinct (strand,
    5' end) keys, the duplicates.
    """
    v = {"F": _FILE, "C": chrom, "N": n, "R": reverse, "FW": n - reverse, "K": distinct,
         "ANS": n - distinct, "P": starts}
    py = python_check(_PY, v)
    return (
        turn(fill("samtools view -H @F@ | head -5\nsamtools view @F@ | awk -F'\\t' '$3 == \"@C@\""
                  "' > reads.sam\nwc -l < reads.sam\ncut -f2 reads.sam | sort | uniq -c\ncut -f6 "
                  "reads.sam | sort | uniq -c | head", **v),
             node("load", fill("@N@ reads on @C@: @FW@ forward, @R@ reverse, all mapped, "
                               "starting at @P@ positions", **v),
                  "reads.sam"), [
                 check("conservation", fill("every @C@ read kept: @N@", **v), recounted(
                     "wc -l < reads.sam", fill("samtools view @F@ | cut -f3 | grep -cx @C@", **v),
                     n)),
                 check("type", fill("@R@ reverse-strand reads (FLAG 16)", **v), recounted(
                     "awk -F'\\t' '$2 == 16' reads.sam | wc -l", _flagged(chrom, 16),
                     reverse, "test \"$(awk -F'\\t' '$2 != 0 && $2 != 16' reads.sam | wc -l)\" -eq 0")),
                 check("range", fill("they start at @P@ distinct leftmost positions (POS)", **v),
                       recounted("cut -f4 reads.sam | sort -u | wc -l", fill(
                           "samtools view @F@ | awk -F'\\t' '$3 == \"@C@\" { print $4 }' | sort -u | "
                           "wc -l", **v), starts))]),
        turn(_ENDS, node("transform", fill("one (strand, 5' end) per read: @N@ ends, @K@ distinct; "
                                           "a reverse read's 5' end is its last aligned base",
                                           **v), "ends.tsv", "n1"), [
            check("conservation", fill("one 5' end per read: @N@", **v), recounted(
                "wc -l < ends.tsv", py("len(e)"), n)),
            check("invariance", fill("@K@ distinct (strand, 5' end) keys, as python computes them "
                                     "from the CIGARs", **v), recounted(
                "sort -u ends.tsv | wc -l", py("len(set(e))"), distinct)),
            check("type", fill("@R@ of them on the reverse strand", **v), recounted(
                "grep -c '^-' ends.tsv", py("sum(1 for s, _ in e if s)"), reverse))]),
        turn("echo $(( $(wc -l < ends.tsv) - $(sort -u ends.tsv | wc -l) )) > n.txt\ncat n.txt",
             node("test", fill("@ANS@ duplicates on @C@ by (strand, 5' end); none is flagged",
                               **v), "n.txt", "n2"), [
                 check("invariance", "python with CIGAR-aware 5' ends agrees",
                       py("len(e) - len(set(e)) == int(open('n.txt').read()) == @ANS@")),
                 check("conservation", fill("@ANS@ = @N@ reads less @K@ distinct ends", **v),
                       py("len(set(e)) == @K@ and int(open('n.txt').read()) + @K@ == len(open("
                          "'ends.tsv').readlines())"))]),
        final(str(n - distinct)),
    )


def _answer(reads: list[Alignment], chrom: str) -> int:
    return sum(r.chrom == chrom for r in reads) - unique_reads(reads, chrom)


_POS_AT = 8  # after block_size and refID (4 bytes each)


def _spans(raw: bytes) -> tuple[int, list[tuple[bytes, Alignment]]] | None:
    """Where the header of a decoded BAM stream ends, and each record's bytes."""
    try:
        _, located = _scan(raw)
    except ValueError:  # not a BAM stream: nothing to vary
        return None
    spans = [(raw[at:at + 4 + struct.unpack_from("<i", raw, at)[0]], r) for at, r in located]
    return (located[0][0] if located else len(raw)), spans


def _controls(chrom: str) -> tuple[Mutator, ...]:
    """Edits of the decoded stream that keep the answer but change the content, so a
    fingerprint of the file fails them (`_spans`): reads on other chromosomes dropped (about a
    tenth), every record in another order, a ``@CO`` line added to the header text."""
    def drop_others(raw: bytes, rng: random.Random) -> bytes | None:
        found = _spans(raw)
        others = [i for i, (_, r) in enumerate(found[1]) if r.chrom != chrom] if found else []
        if not found or not others:
            return None
        gone = set(rng.sample(others, max(1, len(others) // 10)))
        return raw[:found[0]] + b"".join(b for i, (b, _) in enumerate(found[1]) if i not in gone)

    def shuffle(raw: bytes, rng: random.Random) -> bytes | None:
        found = _spans(raw)
        if not found or len(found[1]) < 2:
            return None
        order = [b for b, _ in found[1]]
        rng.shuffle(order)
        return raw[:found[0]] + b"".join(order)

    def comment(raw: bytes, rng: random.Random) -> bytes | None:
        if _spans(raw) is None:
            return None
        (l_text,) = struct.unpack_from("<i", raw, 4)
        text = raw[8:8 + l_text]
        body = text.rstrip(b"\0")
        note = b"@CO\tvera %012x\n" % rng.getrandbits(48)
        new = body + (b"\n" if body and not body.endswith(b"\n") else b"") + note
        new += text[len(body):]
        return raw[:4] + struct.pack("<i", len(new)) + new + raw[8 + l_text:]

    return drop_others, shuffle, comment


def _solve(contents: Contents, *, chrom: str) -> str:
    """The reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return str(_answer(parse_bam(content_of(contents, _FILE))[1], chrom))


def _reference(chrom: str) -> Reference:
    """BAM is binary: no record-level control transform applies (``recompress`` only, a
    BGZF file being gzip members), so the type brings its own controls (`_controls`).
    The aimed mutants edit the decoded stream with
    struct: one read on the chromosome copied next to itself (one more duplicate), or
    one duplicate moved 7 bases on (one fewer, unless it lands on another read's end)."""
    def pick(raw: bytes, rng: random.Random, duplicated: bool) -> tuple[int, int] | None:
        try:
            _, located = _scan(raw)
        except ValueError:  # not a BAM stream: nothing to aim at
            return None
        mine = [(at, r) for at, r in located if r.chrom == chrom and not r.flag & 4]
        if duplicated:
            seen = Counter(_key(r) for _, r in mine)
            mine = [(at, r) for at, r in mine if seen[_key(r)] > 1]
        if not mine:
            return None
        at, _ = mine[rng.randrange(len(mine))]
        return at, 4 + struct.unpack_from("<i", raw, at)[0]

    def copy_read(raw: bytes, rng: random.Random) -> bytes | None:
        found = pick(raw, rng, duplicated=False)
        if found is None:
            return None
        at, size = found
        return raw[:at + size] + raw[at:at + size] + raw[at + size:]

    def move_duplicate(raw: bytes, rng: random.Random) -> bytes | None:
        found = pick(raw, rng, duplicated=True)
        if found is None:
            return None
        out = bytearray(raw)
        (pos,) = struct.unpack_from("<i", raw, found[0] + _POS_AT)
        struct.pack_into("<i", out, found[0] + _POS_AT, pos + 7)
        return bytes(out)

    return Reference(
        solve=partial(_solve, chrom=chrom),
        preserving={_FILE: ("recompress",)},
        mutators={_FILE: (copy_read, move_duplicate)},
        controls={_FILE: _controls(chrom)})


def duplicates(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Reads left after deduplication on one chromosome (trap: strand and 5' end ignored)."""
    data = files["control.bam"]
    _, reads = read_bam(data)
    counts = {c: sum(r.chrom == c for r in reads) for c in {r.chrom for r in reads}}
    usable = sorted(c for c, n in counts.items()
                    if n >= 150 and n - unique_reads(reads, c) != marked_duplicates(reads, c))
    chrom = usable[int(rng.integers(len(usable)))]
    mine = [r for r in reads if r.chrom == chrom]
    answer, wrong = _answer(reads, chrom), marked_duplicates(reads, chrom)
    careless = (f"samtools view -f 1024 {_FILE} | awk -F'\\t' '$3 == \"{chrom}\"' | wc -l")
    trap = careless_trap("trusting FLAG 1024: the file was never duplicate-marked", careless,
                         f"{wrong} duplicates on {chrom}", "no read is flagged duplicate",
                         f"test \"$({careless})\" -eq {wrong}", wrong)
    instance = Instance(files={_FILE: data}, question=_question(chrom), answer=str(answer),
                        grader={"kind": "numeric", "abs_tol": 0},
                        solution=_solution(chrom, len(mine), sum(r.flag & 16 > 0 for r in mine),
                                           unique_reads(reads, chrom), len({r.pos for r in mine})),
                        trap=trap, tags=("bam", "duplicates", "strand", "pyranges"),
                        reference=_reference(chrom))
    probe = Probe("chrEBV", _question("chrEBV"),
                  f"samtools view -H {_FILE} | grep '^@SQ' | cut -f2 | cut -d: -f2",
                  f"samtools view -c {_FILE}", len(reads))
    return RealInstance(instance, _FILE, probe)
