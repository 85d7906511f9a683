"""Real annotations: an Ensembl GTF (exonic footprint) and a FlyBase GFF3 (exons per mRNA).

Why these traps.

* ``gtf.exonic_bp``: a GTF lists exons once *per transcript*, so an exon shared by five
  isoforms is five lines. Summing ``end - start + 1`` over a gene's exon lines counts
  shared bases many times (SAMD11: 28,895 bp of exon lines for a 4,173 bp footprint).
  GTF coordinates are 1-based and inclusive; attributes are ``key "value";`` pairs.
* ``gff.exon_count``: FlyBase's GFF3 writes an exon shared by several mRNAs once, with a
  comma-separated ``Parent=FBtr1,FBtr2,FBtr3``. ``grep 'Parent=FBtr2'`` only finds the
  exons where the mRNA is listed *first* (attributes are ``key=value;`` pairs, values
  may be lists): l(2)gl-RD has 9 exons, and the grep finds 2.

Answers are computed here by parsing the attributes; the tests recompute them with
interval arithmetic (GTF) and an awk count of the Parent lists (GFF).
"""

from __future__ import annotations

import gzip
import random
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
from vera_env.tasks.real.kinds import (
    Probe,
    RealInstance,
    careless_trap,
    content_of,
    field_mutator,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import Reference

__all__ = ["GffExons", "exon_count", "exonic_bp", "gff_attributes", "gff_exons", "gtf_exons",
           "merged_length"]

_GTF = "ensembl.gtf.gz"
_GFF = "dmel.gff"
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


def _gtf_solution(gene: str, n_lines: int, n_tx: int, summed: int, answer: int
                  ) -> tuple[str, ...]:
    v = {"F": _GTF, "G": gene, "N": n_lines, "T": n_tx, "W": summed, "ANS": answer}
    pick = ("zcat @F@ | awk -F'\\t' '$3 == \"exon\" && index($9, \"gene_name \\\"@G@\\\";\")'")
    return (
        turn(fill(pick + " | cut -f4,5 | sort -k1,1n -k2,2n > exons.tsv\nwc -l < exons.tsv\n"
                  "zcat @F@ | grep -F 'gene_name \"@G@\";' | cut -f3 | sort | uniq -c", **v),
             node("load", fill("@N@ exon lines of @G@ over @T@ transcripts", **v), "exons.tsv"), [
                 check("conservation", fill("every exon line of the gene kept: @N@ lines, @W@ bp "
                                            "before merging", **v), verdict(fill(
                     "test \"$(wc -l < exons.tsv)\" -eq @N@ && test \"$(awk -F'\\t' '{ s += $2 - $1 + 1 "
                     "} END { print s }' exons.tsv)\" -eq @W@ && test \"$(zcat @F@ | grep -F "
                     "'gene_name \"@G@\";' | cut -f3 | grep -cx exon)\" -eq @N@", **v))),
                 check("range", "1-based inclusive intervals, start <= end", fill(
                     "awk -F'\\t' '$1 < 1 || $2 < $1 { bad = 1 } END { print (!bad && NR == @N@)"
                     " ? \"True\" : \"False\" }' exons.tsv", **v))]),
        turn("awk -F'\\t' 'NR == 1 || $1 > e { if (NR > 1) t += e - s + 1; s = $1; e = $2; next }"
             " $2 > e { e = $2 } END { t += e - s + 1; print t }' exons.tsv > bp.txt\ncat bp.txt",
             node("test", fill("@G@ exons cover @ANS@ bp once merged", **v), "bp.txt", "n1"), [
                 check("invariance", "a python set of covered bases agrees", fill(
                     "python3 -c \"b = set(); [b.update(range(int(s), int(e) + 1)) for s, e in "
                     "(l.split() for l in open('exons.tsv'))]; print(len(b) == int(open("
                     "'bp.txt').read()) == @ANS@)\"", **v)),
                 check("range", fill("the union is shorter than the @W@ bp the exon lines sum to (the "
                                     "wrong route)", **v), verdict(fill(
                     "test \"$(awk -F'\\t' '{ s += $2 - $1 + 1 } END { print s }' exons.tsv)\" -eq @W@ "
                     "&& test \"$(cat bp.txt)\" -lt @W@", **v)))]),
        final(str(answer)),
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
        solve=lambda contents: str(merged_length(gtf_exons(content_of(contents, _GTF))[1]
                                                 .get(gene, []))),
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
                        solution=_gtf_solution(gene, len(exons[gene]), len(transcripts[gene]),
                                               wrong, answer),
                        trap=trap, tags=("gtf", "overlapping-intervals", "pyranges"),
                        reference=_gtf_reference(gene))
    probe = Probe("TP53", _gtf_question("TP53"),
                  f"zcat {_GTF} | grep -o 'gene_name \"[^\"]*\"' | cut -d'\"' -f2 | sort -u",
                  f"zcat {_GTF} | grep -vc '^#'", records)
    return RealInstance(instance, _GTF, probe)


def gff_attributes(column9: str) -> dict[str, str]:
    """GFF3 ``key=value;key=value`` attributes (values left as written, lists unsplit)."""
    return dict(kv.split("=", 1) for kv in column9.strip().split(";") if "=" in kv)


def _gff_question(mrna: str) -> str:
    return with_clause(
        f"{_GFF} is FlyBase's GFF3 annotation (release 5.49) of the start of Drosophila "
        f"melanogaster chromosome arm 2L. How many exons does the mRNA with ID {mrna} have "
        "(FlyBase exon features that belong to it)? Answer with one integer.")


def _gff_solution(mrna: str, links: int, first: int, shared: int, answer: int
                  ) -> tuple[str, ...]:
    v = {"F": _GFF, "T": mrna, "L": links, "K": first, "S": shared, "ANS": answer}
    parents = "awk -F'\\t' '$2 == \"FlyBase\" && $3 == \"exon\"' @F@ | grep -o 'Parent=[^;]*'"
    return (
        turn(fill(parents + " | cut -d= -f2 | tr , '\\n' | sort | uniq -c | awk '{ print $2 "
                  "\"\\t\" $1 }' > exons_per_mrna.tsv\nwc -l < exons_per_mrna.tsv\n" + parents
                  + " | head -3", **v),
             node("transform", fill("exons per mRNA, every Parent of a shared exon credited "
                                    "(@L@ exon-mRNA links)", **v), "exons_per_mrna.tsv"), [
                 check("conservation", "every exon-to-mRNA link counted once", verdict(fill(
                     "test \"$(awk '{ s += $2 } END { print s }' exons_per_mrna.tsv)\" -eq @L@ "
                     "&& test \"$(" + parents + " | tr -cd ',\\n' | wc -c)\" -eq @L@", **v)))]),
        turn(fill("awk -F'\\t' '$1 == \"@T@\" { print $2 }' exons_per_mrna.tsv > n.txt\ncat n.txt",
                  **v),
             node("test", fill("@T@ has @ANS@ exons", **v), "n.txt", "n1"), [
                 check("invariance", fill("a python parse of the Parent lists agrees: @ANS@ for @T@, "
                                          "@L@ links in all", **v), fill(
                     "python3 -c \"f = [l.rstrip('\\n').split('\\t') for l in open('@F@') if not "
                     "l.startswith('#')]; a = [dict(kv.split('=', 1) for kv in x[8].split(';') "
                     "if '=' in kv) for x in f if len(x) == 9 and x[1] == 'FlyBase' and x[2] == "
                     "'exon']; print(sum('@T@' in d['Parent'].split(',') for d in a) == int("
                     "open('n.txt').read()) == @ANS@ and sum(d['Parent'].count(',') + 1 for d in a) "
                     "== @L@)\"", **v)),
                 check("range", fill("grep 'Parent=@T@' counts @K@, the wrong route: @S@ exons "
                                     "list several Parents", **v), verdict(fill(
                     "test \"$(awk -F'\\t' '$3 == \"exon\"' @F@ | grep -c 'Parent=@T@')\" -eq @K@ && "
                     "test \"$(" + parents + " | grep -c ,)\" -eq @S@ && test \"$(cat n.txt)\" -gt @K@",
                     **v)))]),
        final(str(answer)),
    )


class GffExons(NamedTuple):
    """What a GFF3 says about FlyBase exons and mRNAs (see `gff_exons`)."""

    every: Counter[str]
    first: Counter[str]
    mrnas: list[str]
    records: int
    shared: int


def gff_exons(content: bytes) -> GffExons:
    """Exons per mRNA (``every``: each Parent listed; ``first``: listed first), mRNA ids,
    records, and exons with several Parents, of a decoded GFF3 (FlyBase features only).

    Raises:
        ValueError: A FlyBase mRNA without ID or exon without Parent.
    """
    every: Counter[str] = Counter()
    first: Counter[str] = Counter()
    mrnas: list[str] = []
    records = shared = 0
    for line in content.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        records += 1
        f = line.split("\t")
        if len(f) != 9 or f[1] != "FlyBase" or f[2] not in ("mRNA", "exon"):
            continue
        attrs = gff_attributes(f[8])
        key = "ID" if f[2] == "mRNA" else "Parent"
        if key not in attrs:
            raise ValueError(f"FlyBase {f[2]} without {key}: {line[:80]!r}")
        if f[2] == "mRNA":
            mrnas.append(attrs["ID"])
            continue
        parents = attrs["Parent"].split(",")
        shared += len(parents) > 1
        first[parents[0]] += 1
        every.update(parents)
    return GffExons(every, first, mrnas, records, shared)


def _gff_reference(mrna: str) -> Reference:
    """Order-free, comments do not matter, and only FlyBase exons listing the mRNA are
    read; aimed mutants take it out of one exon's Parent list or add it to another's."""
    me = mrna.encode()

    def parents(record: bytes) -> list[bytes] | None:
        f = record.rstrip(b"\r\n").split(b"\t")
        if len(f) != 9 or f[1] != b"FlyBase" or f[2] != b"exon":
            return None
        for kv in f[8].split(b";"):
            if kv.startswith(b"Parent="):
                return kv[7:].split(b",")
        return None

    def mine(record: bytes) -> bool:
        return me in record and me in (parents(record) or ())

    def other_exon(record: bytes) -> bool:
        return me not in (parents(record) or (me,))

    def irrelevant(record: bytes) -> bool:
        return not record.startswith(b"#") and record.count(b"\t") == 8 and not mine(record)

    def relist(add: bool) -> Callable[[list[bytes]], bool]:
        def edit(f: list[bytes]) -> bool:
            attrs = f[8].split(b";")
            at = next(i for i, kv in enumerate(attrs) if kv.startswith(b"Parent="))
            listed = attrs[at][7:].split(b",")
            listed = [*listed, me] if add else [p for p in listed if p != me]
            attrs[at] = b"Parent=" + b",".join(listed or [me + b"-gone"])
            f[8] = b";".join(attrs)
            return True
        return edit

    return Reference(
        solve=lambda contents: str(gff_exons(content_of(contents, _GFF)).every[mrna]),
        preserving={_GFF: ("shuffle_records", "add_comment", "drop_irrelevant")},
        irrelevant={_GFF: irrelevant},
        mutators={_GFF: (field_mutator(mine, b"\t", relist(False)),
                         field_mutator(other_exon, b"\t", relist(True)))})


def exon_count(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Exons of one mRNA (trap: only exons listing it as their first Parent are found)."""
    data = files["dmel.gff"]
    every, first, mrnas, records, shared = gff_exons(data)
    usable = sorted(m for m in mrnas if every[m] >= 4 and 1 <= first[m] < every[m])
    mrna = usable[int(rng.integers(len(usable)))]
    careless = f"awk -F'\\t' '$3 == \"exon\"' {_GFF} | grep -c 'Parent={mrna}'"
    trap = careless_trap("grep 'Parent=ID' misses exons whose Parent list names it second",
                         careless,
                         f"{mrna}: {first[mrna]} exons", "at least one exon",
                         f"test \"$({careless})\" -gt 0", first[mrna])
    instance = Instance(files={_GFF: data}, question=_gff_question(mrna), answer=str(every[mrna]),
                        grader={"kind": "numeric", "abs_tol": 0},
                        solution=_gff_solution(mrna, sum(every.values()), first[mrna], shared,
                                               every[mrna]), trap=trap,
                        tags=("gff3", "multi-valued-attributes", "gffutils"),
                        reference=_gff_reference(mrna))
    probe = Probe("FBtr0081624", _gff_question("FBtr0081624"),
                  f"awk -F'\\t' '$3 == \"mRNA\"' {_GFF} | grep -o 'ID=[^;]*' | cut -d= -f2",
                  f"grep -vc '^#' {_GFF}", records)
    return RealInstance(instance, _GFF, probe)
