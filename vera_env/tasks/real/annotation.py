"""Real annotation (GTF): the exonic footprint of a gene in an Ensembl annotation.

Why this trap. ``gtf.exonic_bp``: a GTF lists exons once *per transcript*, so an exon shared by five
  isoforms is five lines. Summing ``end - start + 1`` over a gene's exon lines counts
  shared bases many times (SAMD11: 28,895 bp of exon lines for a 4,173 bp footprint).
  GTF coordinates are 1-based and inclusive; attributes are ``key "value";`` pairs.

The answer is computed here by merging intervals; the tests recompute it with a boolean
coverage array. The FlyBase GFF3 type lives in `flybase`.
"""

from __future__ import annotations

import gzip
import random
from collections import defaultdict
from collections.abc import Mapping
from functools import partial

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn
from vera_env.tasks.real.kinds import (
    Census,
    Probe,
    RealInstance,
    careless_trap,
    content_of,
    field_mutator,
    python_check,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["exonic_bp", "gtf_exons", "merged_length"]

_GTF = "ensembl.gtf.gz"
_GENES = ("DDX11L1", "OR4F5", "SAMD11", "KLHL17", "PLEKHN1", "ISG15", "AGRN", "TTLL10",
          "NOC2L", "PERM1", "HES4", "C1orf159", "LINC01128", "FAM41C", "FAM138A")


def merged_length(intervals: list[tuple[int, int]]) -> int:
    """Bases covered by 1-based inclusive intervals, each counted once."""
    total, end = 0, -1
    for s, e in sorted(intervals):
        if s > end:
            total += e - s + 1
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def _gtf_question(gene: str) -> str:
    return with_clause(
        f"{_GTF} is an Ensembl GTF annotation of genes at the start of human chromosome 1 "
        f"(GRCh38). How many base pairs are covered by the exons of the gene {gene} "
        "(gene_name), counting each base once however many of its transcripts include it? "
        "Answer with one integer.")


_GTF_PY = ("python3 -c \"import gzip; x = [l.split('\\t') for l in gzip.open('@F@', 'rt') if not "
           "l.startswith('#')]; e = sorted((int(f[3]), int(f[4])) for f in x if f[2] == 'exon' and "
           "'gene_name \\\"@G@\\\";' in f[8]); b = []; [b.append([s, t]) if not b or s > b[-1][1] "
           "else b[-1].__setitem__(1, max(b[-1][1], t)) for s, t in e]; ")
"""The gene's exon intervals ``e`` and their merged blocks ``b``, by python: the second
route the GTF checks compare the model's awk files with."""


def _blocks(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """1-based inclusive intervals merged into disjoint blocks (as `merged_length` counts)."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


_PICK = "zcat @F@ | awk -F'\\t' '$3 == \"exon\" && index($9, \"gene_name \\\"@G@\\\";\")'"


def _intervals(name: str) -> str:
    """The model's intervals in ``name`` (start, end a line), as python reads them."""
    return f"[tuple(map(int, l.split())) for l in open('{name}')]"


def _gtf_solution(gene: str, exons: list[tuple[int, int]], n_tx: int) -> tuple[str, ...]:
    """Pull the gene's exon lines, merge them into blocks, add the blocks up.

    The checks recount from the GTF what the footprint is built from: the exon lines and
    the bases they sum to, where they start and end, the merged blocks and the bases
    they cover.
    """
    blocks = _blocks(exons)
    v = {"F": _GTF, "G": gene, "N": len(exons), "T": n_tx, "W": sum(e - s + 1 for s, e in exons),
         "K": len(blocks), "ANS": merged_length(exons), "LO": blocks[0][0], "HI": blocks[-1][1]}
    py = python_check(_GTF_PY, v)
    return (
        turn(fill(_PICK + " | cut -f4,5 | sort -k1,1n -k2,2n > exons.tsv\nwc -l < exons.tsv\n"
                  "zcat @F@ | grep -F 'gene_name \"@G@\";' | cut -f3 | sort | uniq -c", **v),
             node("load", fill("@N@ exon lines of @G@ over @T@ transcripts, @W@ bp before "
                               "merging", **v), "exons.tsv"), [
                 check("conservation", fill("every exon line of the gene kept: @N@", **v),
                       py(f"len({_intervals('exons.tsv')}) == len(e) == @N@")),
                 check("conservation", fill("the exon lines sum to @W@ bp", **v),
                       py("sum(t - s + 1 for s, t in " + _intervals("exons.tsv")
                          + ") == sum(t - s + 1 for s, t in e) == @W@")),
                 check("range", fill("1-based, start <= end, from @LO@ to @HI@", **v),
                       py("all(1 <= s <= t for s, t in " + _intervals("exons.tsv")
                          + ") and [b[0][0], b[-1][1]] == [@LO@, @HI@]"))]),
        turn("awk -F'\\t' 'NR == 1 { s = $1; e = $2; next } $1 > e { print s \"\\t\" e; s = $1; "
             "e = $2; next } $2 > e { e = $2 } END { print s \"\\t\" e }' exons.tsv > blocks.tsv\n"
             "cat blocks.tsv",
             node("transform", fill("overlapping exons merged into @K@ disjoint blocks", **v),
                  "blocks.tsv", "n1"), [
                 check("conservation", fill("@K@ blocks, as merging the GTF's exons gives", **v),
                       py(f"len({_intervals('blocks.tsv')}) == len(b) == @K@ and "
                          "sum(t - s + 1 for s, t in b) == @ANS@")),
                 check("conservation", "every exon line of the gene lies inside one block",
                       py("all(any(p <= s and t <= q for p, q in " + _intervals("blocks.tsv")
                          + ") for s, t in e)")),
                 check("invariance", fill("the blocks cover @ANS@ bp", **v),
                       py("sum(t - s + 1 for s, t in " + _intervals("blocks.tsv") + ") == "
                          "sum(t - s + 1 for s, t in b) == @ANS@"))]),
        turn("awk -F'\\t' '{ t += $2 - $1 + 1 } END { print t }' blocks.tsv > bp.txt\ncat bp.txt",
             node("test", fill("@G@ exons cover @ANS@ bp once merged", **v), "bp.txt", "n2"), [
                 check("invariance", "a python set of covered bases agrees", py(
                     "len(set().union(*(range(s, t + 1) for s, t in e))) == int(open('bp.txt')"
                     ".read()) == @ANS@")),
                 check("range", fill("the union of @K@ blocks, shorter than what the exon "
                                     "lines sum to (the wrong route)", **v), py(
                     "len(b) == @K@ and int(open('bp.txt').read()) < sum(t - s + 1 for s, t in "
                     "e) and int(open('bp.txt').read()) == @ANS@"))]),
        final(str(v["ANS"])),
    )


def gtf_exons(content: bytes) -> tuple[int, dict[str, list[tuple[int, int]]],
                                        dict[str, set[str]]]:
    """(records, gene_name -> exon intervals, gene_name -> transcript ids) of a decoded GTF.

    Raises:
        ValueError: A record without 9 tab-separated columns or with bad coordinates.
    """
    exons: dict[str, list[tuple[int, int]]] = defaultdict(list)
    transcripts: dict[str, set[str]] = defaultdict(set)
    records = 0
    for line in content.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        records += 1
        f = line.split("\t")
        if len(f) < 9:
            raise ValueError(f"GTF record with {len(f)} columns: {line[:80]!r}")
        if f[2] == "exon" and 'gene_name "' in f[8]:
            name = f[8].split('gene_name "', 1)[1].split('"', 1)[0]
            exons[name].append((int(f[3]), int(f[4])))
            transcripts[name].add(f[8].partition('transcript_id "')[2].split('"', 1)[0])
    return records, exons, transcripts


def _gtf_solve(contents: Contents, *, gene: str) -> str:
    """The reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return str(merged_length(gtf_exons(content_of(contents, _GTF))[1].get(gene, [])))


def _gtf_reference(gene: str) -> Reference:
    """Order-free, comments do not matter, and only the gene's exon lines are read;
    aimed mutants stretch one of its exons past the footprint's end, or drop one that
    covers bases no other exon does."""
    tag = f'gene_name "{gene}";'.encode()

    def gene_exon(record: bytes) -> bool:
        f = record.split(b"\t")
        return len(f) >= 9 and f[2] == b"exon" and tag in f[8]

    def irrelevant(record: bytes) -> bool:
        return not record.startswith(b"#") and record.count(b"\t") >= 8 and not gene_exon(record)

    def widen(content: bytes, rng: random.Random) -> bytes | None:
        ends = [e for _, e in gtf_exons(content)[1].get(gene, [])]

        def past_the_end(f: list[bytes]) -> bool:  # the footprint grows by 100 bp
            f[4] = b"%d" % (max(ends) + 100)
            return True

        return field_mutator(gene_exon, b"\t", past_the_end)(content, rng) if ends else None

    def drop(content: bytes, rng: random.Random) -> bytes | None:
        """One of the gene's exons removed, among those with bases no other one covers."""
        lines = content.splitlines(keepends=True)
        mine: dict[int, tuple[int, int]] = {}
        for i, line in enumerate(lines):
            if gene_exon(line):
                f = line.split(b"\t")
                mine[i] = (int(f[3]), int(f[4]))
        whole = merged_length(list(mine.values()))
        own = [i for i in mine if merged_length([v for k, v in mine.items() if k != i]) < whole]
        if not own:
            return None
        del lines[own[rng.randrange(len(own))]]
        return b"".join(lines)

    return Reference(
        solve=partial(_gtf_solve, gene=gene),
        preserving={_GTF: ("recompress", "shuffle_records", "add_comment", "drop_irrelevant")},
        irrelevant={_GTF: irrelevant},
        mutators={_GTF: (widen, drop)})


def exonic_bp(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Exonic footprint of one gene (trap: shared exons summed once per transcript)."""
    data = files["ensembl.gtf.gz"]
    records, exons, transcripts = gtf_exons(gzip.decompress(data))
    usable = [g for g in _GENES if g in exons
              and merged_length(exons[g]) < sum(e - s + 1 for s, e in exons[g])]
    gene = usable[int(rng.integers(len(usable)))]
    answer = merged_length(exons[gene])
    wrong = sum(e - s + 1 for s, e in exons[gene])
    careless = (f"zcat {_GTF} | awk -F'\\t' '$3 == \"exon\" && index($9, \"gene_name \\\"{gene}"
                "\\\";\") { s += $5 - $4 + 1 } END { print s }'")
    trap = careless_trap("exons shared by transcripts are listed once per transcript", careless,
                         f"{gene} exons: {wrong} bp", "a positive length",
                         f"test \"$({careless})\" -gt 0", wrong)
    instance = Instance(files={_GTF: data}, question=_gtf_question(gene), answer=str(answer),
                        grader={"kind": "numeric", "abs_tol": 0},
                        solution=_gtf_solution(gene, exons[gene], len(transcripts[gene])),
                        trap=trap, tags=("gtf", "overlapping-intervals", "pyranges"),
                        reference=_gtf_reference(gene))
    probe = Probe("TP53", _gtf_question("TP53"),
                  f"zcat {_GTF} | grep -o 'gene_name \"[^\"]*\"' | cut -d'\"' -f2 | sort -u",
                  f"zcat {_GTF} | grep -vc '^#'", records)
    reads = Census(f"zcat {_GTF} | awk -F'\\t' '$3 == \"exon\" && index($9, \"gene_name "
                   f"\\\"{gene}\\\";\")' | wc -l", len(exons[gene]), f"exon lines of {gene}")
    return RealInstance(instance, _GTF, probe, reads=reads)
