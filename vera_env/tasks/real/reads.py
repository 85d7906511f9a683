"""Real reads (FASTQ): how many reads a MiSeq 16S file holds.

Why this trap. A FASTQ record is four lines and its header starts with ``@`` -- but
``@`` is also Phred+33 quality 31, so a quality line can start with it too. ``grep -c
'^@'`` counts those lines as extra reads: 1,516 "reads" in a file of 1,500. The count
must come from the line count (records are exactly four lines here) or a parser that
walks records. The files are real Illumina reads shipped with Debian's ``r-bioc-dada2``.

The answer is counted here by walking four-line records and checking their shape; the
tests recount with awk over line numbers.
"""

from __future__ import annotations

import gzip
import random
from collections.abc import Mapping
from functools import partial

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, final, node, turn
from vera_env.tasks.builtin.solvers import aimed
from vera_env.tasks.real.kinds import (
    Census,
    Probe,
    RealInstance,
    careless_trap,
    content_of,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import Contents, ControlTransform, Reference

__all__ = ["FASTQS", "fastq_records", "parse_fastq", "read_count"]

FASTQS = ("sam1F.fastq.gz", "sam1R.fastq.gz", "sam2F.fastq.gz", "sam2R.fastq.gz")


def fastq_records(data: bytes) -> list[tuple[str, str, str]]:
    """(header, sequence, quality) of every record of a gzipped four-line FASTQ.

    Raises:
        ValueError: A record is not ``@header / sequence / + / quality`` of equal lengths.
    """
    return parse_fastq(gzip.decompress(data))


def parse_fastq(content: bytes) -> list[tuple[str, str, str]]:
    """(header, sequence, quality) of every record of a decoded four-line FASTQ.

    Raises:
        ValueError: A record is not ``@header / sequence / + / quality`` of equal lengths.
    """
    lines = content.decode().splitlines()
    if len(lines) % 4:
        raise ValueError(f"{len(lines)} lines is not a whole number of records")
    records = []
    for i in range(0, len(lines), 4):
        head, seq, plus, qual = lines[i:i + 4]
        if not head.startswith("@") or not plus.startswith("+") or len(seq) != len(qual):
            raise ValueError(f"malformed record at line {i + 1}")
        records.append((head, seq, qual))
    return records


def _edit_record(content: bytes, rng: random.Random, copy: bool) -> bytes | None:
    """``content`` with one four-line record removed, or repeated after itself."""
    lines = content.splitlines(keepends=True)
    if len(lines) < 8 or len(lines) % 4:
        return None
    at = 4 * rng.randrange(len(lines) // 4)
    record = lines[at:at + 4]
    return b"".join(lines[:at] + (record * 2 if copy else []) + lines[at + 4:])


def _solve(contents: Contents, *, name: str) -> str:
    """The reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return str(len(parse_fastq(content_of(contents, name))))


def _reference(name: str) -> Reference:
    """Records are order-free and the other three files are never read (every record of
    them is irrelevant); aimed mutants drop one record of the file asked about or repeat
    one (the generic line edits break the four-line layout, which the solver refuses)."""
    asked: tuple[ControlTransform, ...] = ("recompress", "shuffle_records")
    preserving = {f: asked if f == name else (*asked, "drop_irrelevant") for f in FASTQS}
    return Reference(
        solve=partial(_solve, name=name),
        preserving=preserving,
        irrelevant={f: (lambda record: True) for f in FASTQS if f != name},
        mutators={name: (lambda c, rng: _edit_record(c, rng, copy=False),
                         lambda c, rng: _edit_record(c, rng, copy=True))},
        controls={name: aimed(_rewritten_reads)})


_COMPLEMENT = bytes.maketrans(b"ACGTacgt", b"TGCAtgca")


def _rewritten_reads(content: bytes, rng: random.Random) -> bytes | None:
    """Every read's bases complemented and its qualities shifted (the first quality
    character kept, so which quality lines start with ``@`` does not change): a count
    of reads does not read them, and every record's bytes change."""
    lines = content.splitlines(keepends=True)
    if len(lines) < 4 or len(lines) % 4:
        return None
    shift = rng.randint(1, 40)
    for i in range(1, len(lines), 4):
        lines[i] = lines[i].translate(_COMPLEMENT)
        qual = lines[i + 2]
        body = qual.rstrip(b"\r\n")
        lines[i + 2] = body[:1] + bytes(33 + (q - 33 + shift) % 41 for q in body[1:]) \
            + qual[len(body):]
    return b"".join(lines)


def _question(name: str) -> str:
    return with_clause(
        "The folder holds Illumina MiSeq 16S amplicon reads of two samples, sam1 and sam2, "
        f"forward (F) and reverse (R), as gzipped FASTQ. How many reads does {name} hold? "
        "Answer with one integer.")


def _fill(template: str, **values: object) -> str:
    """`fill` for FASTQ commands, which need a literal ``@`` (the header mark)."""
    for key, value in values.items():
        template = template.replace(f"%{key}%", str(value))
    return template


_RECORDS = ("python3 -c \"import gzip; l = gzip.open('%F%', 'rt').read().splitlines(); r = [l[i:i "
            "+ 4] for i in range(0, len(l), 4)]; ")
"""The file's four-line records ``r``, walked by python: the checks' second route."""


def _solution(name: str, n: int, at_quals: int) -> tuple[str, ...]:
    """Check the four-line layout, list the read names, count the records.

    The checks recount from the FASTQ what the count is built from: the records (four
    lines each, a quality as long as its sequence) and the read names, one per record
    and each its own (a record repeated would be counted twice).
    """
    v = {"F": name, "L": 4 * n, "N": n, "Q": at_quals}

    def py(test: str) -> str:
        return _fill(_RECORDS + f"print({test})\"", **v)

    shape = ("zcat %F% | awk 'NR % 4 == 1 && !/^@/ || NR % 4 == 3 && !/^[+]/ { bad = 1 } NR % 4 "
             "== 2 { n = length($0) } NR % 4 == 0 && length($0) != n { bad = 1 } END { print "
             "(!bad && NR == %L%) ? \"True\" : \"False\" }'")
    distinct = "len({x[0].split()[0] for x in r}) == %N%"
    return (
        turn(_fill("zcat %F% | head -8\nzcat %F% | wc -l\nzcat %F% | grep -c '^@'\nzcat %F% | awk "
                   "'NR % 4 == 0 && /^@/' | wc -l", **v),
             node("load", _fill("%L% lines: %N% four-line records, each read named once; %Q% "
                                "quality lines start with @ too", **v)), [
                 check("type", _fill("every record is @header, sequence, +, quality of equal "
                                     "length; %Q% quality lines start with @", **v),
                       _fill("test \"$(zcat %F% | awk 'NR % 4 == 0 && /^@/' | wc -l)\" -eq %Q% && "
                             + shape, **v)),
                 check("conservation", _fill("%N% distinct read names: with %N% records, none repeated", **v),
                       py(distinct))]),
        turn(_fill("zcat %F% | awk 'NR % 4 == 1 { print $1 }' > names.txt\nwc -l < names.txt\n"
                   "sort -u names.txt | wc -l", **v),
             node("transform", _fill("%N% read names, one per record (line 1 of 4), all "
                                     "distinct", **v), "names.txt", "n1"), [
                 check("conservation", _fill("one name per record: %N%", **v),
                       py("len(open('names.txt').readlines()) == len(r) == %N%")),
                 check("conservation", _fill("%N% distinct names, as in %F%", **v),
                       py("len(set(open('names.txt'))) == " + distinct))]),
        turn(_fill("wc -l < names.txt > n.txt\ncat n.txt", **v),
             node("test", _fill("%F% holds %N% reads", **v), "n.txt", "n2"), [
                 check("invariance", "python walking records agrees", py(
                     "len(l) % 4 == 0 and all(h[0] == '@' for h in l[::4]) and len(r) == int("
                     "open('n.txt').read()) == %N%")),
                 check("conservation", _fill("each of the %N% reads counted once: as many as "
                                             "distinct names", **v),
                       py("int(open('n.txt').read()) == len(set(open('names.txt'))) and " +
                          distinct))]),
        final(str(n)),
    )


def read_count(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Reads in one FASTQ (trap: ``grep -c '^@'`` also counts quality lines)."""
    name = FASTQS[int(rng.integers(len(FASTQS)))]
    records = fastq_records(files[name])
    at_quals = sum(1 for _, _, q in records if q.startswith("@"))
    if not at_quals:
        raise RuntimeError(f"read_count: no quality line of {name} starts with @; no trap")
    wrong = len(records) + at_quals
    careless = f"zcat {name} | grep -c '^@'"
    trap = careless_trap("grep -c '^@' also counts quality lines that start with @ (Q31)",
                         careless,
                         f"{name}: {wrong} reads", "some reads",
                         f"test \"$({careless})\" -gt 0", wrong)
    instance = Instance(files={f: files[f] for f in FASTQS}, question=_question(name),
                        answer=str(len(records)), grader={"kind": "numeric", "abs_tol": 0},
                        solution=_solution(name, len(records), at_quals), trap=trap,
                        tags=("fastq", "record-parsing", "dada2"), reference=_reference(name))
    probe = Probe("sam3F.fastq.gz", _question("sam3F.fastq.gz"), "ls *.fastq.gz",
                  f"zcat {name} | awk 'END {{ print NR / 4 }}'", len(records))
    reads = Census(f"zcat {name} | wc -l", 4 * len(records), "lines, four per read")
    return RealInstance(instance, name, probe, reads=reads)
