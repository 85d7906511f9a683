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
from collections import Counter, defaultdict
from collections.abc import Mapping

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
from vera_env.tasks.real.kinds import Probe, RealInstance, careless_trap
from vera_env.tasks.undetermined import with_clause

__all__ = ["exon_count", "exonic_bp", "gff_attributes", "merged_length"]

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


def exonic_bp(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Exonic footprint of one gene (trap: shared exons summed once per transcript)."""
    data = files["ensembl.gtf.gz"]
    exons: dict[str, list[tuple[int, int]]] = defaultdict(list)
    transcripts: dict[str, set[str]] = defaultdict(set)
    records = 0
    for line in gzip.decompress(data).decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        records += 1
        f = line.split("\t")
        if f[2] == "exon":
            name = f[8].split('gene_name "', 1)[1].split('"', 1)[0]
            exons[name].append((int(f[3]), int(f[4])))
            transcripts[name].add(f[8].split('transcript_id "', 1)[1].split('"', 1)[0])
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
                        trap=trap, tags=("gtf", "overlapping-intervals", "pyranges"))
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


def exon_count(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Exons of one mRNA (trap: only exons listing it as their first Parent are found)."""
    data = files["dmel.gff"]
    every: Counter[str] = Counter()
    first: Counter[str] = Counter()
    mrnas: list[str] = []
    records = shared = 0
    for line in data.decode().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        records += 1
        f = line.split("\t")
        if len(f) != 9 or f[1] != "FlyBase":
            continue
        attrs = gff_attributes(f[8])
        if f[2] == "mRNA":
            mrnas.append(attrs["ID"])
        elif f[2] == "exon":
            parents = attrs["Parent"].split(",")
            shared += len(parents) > 1
            first[parents[0]] += 1
            every.update(parents)
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
                        tags=("gff3", "multi-valued-attributes", "gffutils"))
    probe = Probe("FBtr0081624", _gff_question("FBtr0081624"),
                  f"awk -F'\\t' '$3 == \"mRNA\"' {_GFF} | grep -o 'ID=[^;]*' | cut -d= -f2",
                  f"grep -vc '^#' {_GFF}", records)
    return RealInstance(instance, _GFF, probe)
