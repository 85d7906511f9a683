"""Variant table family: heterozygous calls in a VCF with phased genotypes.

Why this trap. Heterozygous is "two different alleles", but the string most people grep
for is ``0/1``. Phased callers and imputation write ``0|1`` and ``1|0``; multi-allelic
sites add ``1/2`` and ``0|2``. Counting ``0/1`` alone gives a number that looks like a
het count and misses most of them. The sample asked about is not always the first
sample column, so the column must be looked up in the ``#CHROM`` header.

The ground truth is decided from the allele pairs the generator draws (``a != b``, both
called); tests recount from the written VCF text.

Each instance's `Reference` recounts from the decoded VCF, finding the sample's column
by name in the ``#CHROM`` line (sites in any order, meta lines free; "cannot be
determined" if the sample is gone). Sites where the sample is not heterozygous (hom or
missing) are never counted, so they may be dropped. The aimed mutants make one phased
heterozygous call homozygous (a check that counts ``0/1`` misses it), make one
homozygous call an unphased ``0/1``, make one homozygote at a multi-allelic site a
``1/2``, or rename the sample in the ``#CHROM`` line: each moves a different one of the
phased, ``0/1`` and second-ALT het counts the solution's checks pin.
"""

from __future__ import annotations

import random
import re
from functools import partial
from typing import NamedTuple

import numpy as np

from vera_env.tasks.builtin.instance import (
    Difficulty,
    Instance,
    check,
    fill,
    final,
    gz,
    node,
    turn,
    verdict,
)
from vera_env.tasks.builtin.solvers import (
    aimed,
    content_of,
    edit_lines,
    lines_of,
    rejoin,
    tsv_fields,
    vcf_table,
)
from vera_env.tasks.model import Trap
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import DEFAULT_REWRITES, Contents, Reference

__all__ = ["genotype_alleles", "het_count"]

_SAMPLES = ("HG00096", "HG00097", "HG00099", "HG00100", "NA12878", "NA12891", "NA12892",
            "NA19238", "NA19239", "NA19240")
_SIZES = {"warmup": (30, 2), "easy": (200, 3), "medium": (2000, 5), "hard": (20_000, 10),
          "xl": (200_000, 10)}  # sites, samples
_HEADER = """##fileformat=VCFv4.2
##source=vera_env-builtin
##contig=<ID=chr1,length=248956422>
##contig=<ID=chr2,length=242193529>
##contig=<ID=chr3,length=198295559>
##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Read depth">
##FORMAT=<ID=GQ,Number=1,Type=Integer,Description="Genotype quality">
"""


class _Calls(NamedTuple):
    """Drawn genotypes: ``alleles[site, sample] = (a, b)``, ``missing``, ``phased``."""

    alleles: np.ndarray
    missing: np.ndarray
    phased: np.ndarray


def _draw_calls(rng: np.random.Generator, multi: np.ndarray, n_samples: int,
                phasing: float = 0.7) -> _Calls:
    n_sites = len(multi)
    u = rng.random((n_sites, n_samples, 2))
    biallelic = (u >= 0.55).astype(np.int64)
    triallelic = np.where(u < 0.45, 0, np.where(u < 0.8, 1, 2))
    return _Calls(np.where(multi[:, None, None], triallelic, biallelic),
                  rng.random((n_sites, n_samples)) < 0.05,
                  rng.random((n_sites, n_samples)) < phasing)


def _gt(pair: list[int], missing: bool, phased: bool) -> str:
    if missing:
        return "./."
    a, b = pair
    return f"{a}|{b}" if phased else f"{min(a, b)}/{max(a, b)}"


def _sites(rng: np.random.Generator, n_sites: int, samples: list[str], trapped: bool = True
           ) -> tuple[list[str], _Calls, list[list[str]]]:
    """VCF body lines, the drawn calls, and per site each sample's GT string; without
    ``trapped`` (warmup) no site is multi-allelic and no call phased, so every het is
    written ``0/1``."""
    n = len(samples)
    multi = rng.random(n_sites) < (0.1 if trapped else 0.0)
    calls = _draw_calls(rng, multi, n, 0.7 if trapped else 0.0)
    refs = rng.integers(0, 4, n_sites)
    alt_order = np.argsort(rng.random((n_sites, 3)), axis=1)
    depths, gqs = rng.integers(5, 60, (n_sites, n)), rng.integers(10, 99, (n_sites, n))
    quals = rng.uniform(30, 3000, n_sites)
    positions = np.cumsum(rng.integers(1, 5000, n_sites)) + 10_000
    chroms = np.sort(rng.integers(1, 4, n_sites))
    lines, gts = [], []
    for i in range(n_sites):
        ref = "ACGT"[refs[i]]
        others = [b for b in "ACGT" if b != ref]
        alt = ",".join(others[j] for j in alt_order[i, :2 if multi[i] else 1])
        row_gt = [_gt(p, m, f) for p, m, f in zip(calls.alleles[i].tolist(),
                                                  calls.missing[i].tolist(),
                                                  calls.phased[i].tolist(), strict=True)]
        cells = [f"{g}:.:." if g == "./." else f"{g}:{d}:{q}"
                 for g, d, q in zip(row_gt, depths[i].tolist(), gqs[i].tolist(), strict=True)]
        depth = int(depths[i][~calls.missing[i]].sum())
        lines.append("\t".join([f"chr{chroms[i]}", str(positions[i]), ".", ref, alt,
                                f"{quals[i]:.1f}", "PASS", f"DP={depth}", "GT:DP:GQ", *cells]))
        gts.append(row_gt)
    return lines, calls, gts


def _solution(sample: str, col: int, n_sites: int, answer: int, phased: int, careless: int,
              multi: int) -> tuple[str, ...]:
    """Three nodes over facts different mutants move: the phased hets, the unphased
    ``0/1`` calls, the hets with a second ALT allele, the sample's name in the header."""
    v = {"S": sample, "COL": col, "ANS": answer, "P": phased, "CARE": careless, "MULTI": multi}
    body = "zcat calls.vcf.gz | grep -v '^#'"
    by_name = fill(f"{body} | cut -f\"$(cat sample_col.txt)\" | cut -d: -f1", **v)
    return (
        turn(fill("zcat calls.vcf.gz | grep '^#CHROM' | tr '\\t' '\\n' | "
                  "awk '$0 == \"@S@\" { print NR }' > sample_col.txt\ncat sample_col.txt\n"
                  f"{body} | wc -l", **v),
             node("load", f"{sample} is column {col}; {n_sites} sites", "sample_col.txt"), [
                 check("type", f"the column holds {sample}", verdict(fill(
                     "test \"$(zcat calls.vcf.gz | grep '^#CHROM' | "
                     "cut -f\"$(cat sample_col.txt)\")\" = @S@", **v))),
                 check("range", fill("the column holds @CARE@ unphased 0/1 calls", **v),
                       verdict(fill(f"test \"$({by_name} | grep -cx '0/1')\" -eq @CARE@", **v))),
                 check("range", fill("the column holds @ANS@ calls of two different alleles",
                                     **v), verdict(fill(
                     f"test \"$({by_name} | awk -F'[|/]' '$1 != \".\" && $2 != \".\" && "
                     "$1 != $2' | wc -l)\" -eq @ANS@", **v)))]),
        turn(f"{body} | cut -f\"$(cat sample_col.txt)\" | cut -d: -f1 > gt.txt\n"
             "sort gt.txt | uniq -c",
             node("transform", f"{n_sites} genotypes of {sample}, phased (|) and unphased (/)",
                  "gt.txt", "n1"), [
                 check("type", f"every genotype is a diploid GT call, {phased} of them phased "
                               "heterozygotes", fill(
                     "awk -F'[|/]' '!/^([0-9]+|[.])[|\\/]([0-9]+|[.])$/ { bad = 1 } "
                     "/[|]/ && $1 != $2 && $1 != \".\" && $2 != \".\" { p++ } "
                     "END { print (p == @P@ && !bad) ? \"True\" : \"False\" }' gt.txt", **v)),
                 check("range", fill("@MULTI@ heterozygotes carry a second ALT allele", **v),
                       fill("awk -F'[|/]' '$1 != \".\" && $2 != \".\" && $1 != $2 && ($1 > 1 || "
                            "$2 > 1) { m++ } END { print (m + 0 == @MULTI@) ? \"True\" : "
                            "\"False\" }' gt.txt", **v)),
                 check("range", fill("@CARE@ of them are written 0/1", **v), verdict(fill(
                     "test \"$(grep -cx '0/1' gt.txt)\" -eq @CARE@", **v)))]),
        turn("awk -F'[|/]' '$1 != \".\" && $2 != \".\" && $1 != $2 { n++ } END { print n + 0 }' "
             "gt.txt > n_het.txt\ncat n_het.txt",
             node("test", f"{sample} is heterozygous at {answer} sites ({phased} of them "
                          "phased)", "n_het.txt", "n2"), [
                 check("invariance", "a python recount agrees", fill(
                     "python3 -c \"import re; g = [re.split('[|/]', l.strip()) for l in "
                     "open('gt.txt')]; n = sum(1 for a, b in g if '.' not in (a, b) and a != b); "
                     "print(n == int(open('n_het.txt').read()) == @ANS@)\"", **v)),
                 check("range", "more hets than the unphased 0/1 calls alone" if phased
                       else "every het is an unphased 0/1 call", verdict(fill(
                           "test \"$(cat n_het.txt)\" @OP@ \"$(grep -cx '0/1' gt.txt)\"",
                           OP="-gt" if phased else "-eq"))),
                 check("range", fill("the unphased hets are the total less the @P@ phased",
                                     **v), verdict(fill(
                     "test $(( $(cat n_het.txt) - @P@ )) -eq \"$(awk -F'/' 'NF == 2 && $1 != "
                     "\".\" && $1 != $2' gt.txt | wc -l)\"", **v)))]),
        final(str(answer)),
    )


# ----- the reference -----

_SPLIT = re.compile(r"[|/]")


def genotype_alleles(field: str) -> list[str]:
    """The alleles of a sample field's GT (``0|1:35:99`` -> ``["0", "1"]``)."""
    return _SPLIT.split(field.split(":", 1)[0])


def _is_het(alleles: list[str]) -> bool:
    return len(alleles) == 2 and "." not in alleles and alleles[0] != alleles[1]


def _solve(contents: Contents, *, sample: str) -> str:
    header, rows = vcf_table(content_of(contents, "calls.vcf.gz"))
    if sample not in header[9:]:
        return CANNOT_DETERMINE
    col = header.index(sample)
    return str(sum(_is_het(genotype_alleles(row[col])) for row in rows))


def _record_alleles(record: bytes, col: int) -> list[str] | None:
    fields = tsv_fields(record)
    if record.startswith(b"#") or len(fields) <= col:
        return None
    return genotype_alleles(fields[col].decode("utf-8", "replace"))


def _not_het(record: bytes, *, col: int) -> bool:
    """The sample is homozygous or missing here: the count never reads this site."""
    alleles = _record_alleles(record, col)
    return alleles is not None and not _is_het(alleles)


def _flip_call(content: bytes, rng: random.Random, *, col: int, kind: str) -> bytes | None:
    """One phased het call made homozygous (``hom``), or one called homozygote made an
    unphased ``0/1`` (``het``), the call's other FORMAT fields kept."""
    lines = lines_of(content)
    if kind == "hom":
        picked = [i for i, line in enumerate(lines) if _is_het(_record_alleles(line, col) or [])
                  and b"|" in tsv_fields(line)[col].split(b":")[0]]
    else:
        picked = [i for i, line in enumerate(lines) if (a := _record_alleles(line, col)) is not None
                  and len(a) == 2 and "." not in a and a[0] == a[1]]
    if not picked:
        return None
    i = rng.choice(picked)
    fields = tsv_fields(lines[i])
    gt, sep, rest = fields[col].partition(b":")
    allele = gt.split(b"|")[0]
    fields[col] = (allele + b"|" + allele if kind == "hom" else b"0/1") + sep + rest
    return edit_lines(content, {i: rejoin(fields, lines[i])})


def _multi_het(content: bytes, rng: random.Random, *, col: int) -> bytes | None:
    """One called homozygote at a multi-allelic site made an unphased ``1/2``: one het
    more, the phased and the ``0/1`` counts kept."""
    lines = lines_of(content)
    picked = [i for i, line in enumerate(lines) if (a := _record_alleles(line, col)) is not None
              and len(a) == 2 and "." not in a and a[0] == a[1]
              and b"," in tsv_fields(line)[4]]
    if not picked:
        return None
    i = rng.choice(picked)
    fields = tsv_fields(lines[i])
    _, sep, rest = fields[col].partition(b":")
    fields[col] = b"1/2" + sep + rest
    return edit_lines(content, {i: rejoin(fields, lines[i])})


def _rename_sample(content: bytes, rng: random.Random, *, sample: str) -> bytes | None:
    """The asked sample renamed in the ``#CHROM`` line (the question's subject gone: a
    check that finds its column by name dies, one that pins the column does not)."""
    lines = lines_of(content)
    at = next((i for i, line in enumerate(lines) if line.startswith(b"#CHROM")), None)
    if at is None:
        return None
    fields = tsv_fields(lines[at])
    renamed = [f"{sample[:2]}{rng.randrange(10**5):05d}x".encode() if f == sample.encode() else f
               for f in fields]
    return edit_lines(content, {at: rejoin(renamed, lines[at])}) if renamed != fields else None


def _reference(sample: str, col: int) -> Reference:
    return Reference(
        solve=partial(_solve, sample=sample),
        preserving={"calls.vcf.gz": ("recompress", "shuffle_records", "add_comment",
                                     "drop_irrelevant")},
        irrelevant={"calls.vcf.gz": partial(_not_het, col=col)},
        mutators={"calls.vcf.gz": aimed(partial(_flip_call, col=col, kind="hom"),
                                        partial(_flip_call, col=col, kind="het"),
                                        partial(_multi_het, col=col),
                                        partial(_rename_sample, sample=sample))},
        # homozygous calls swapped too: a het count keeps, a hash of the genotypes dies
        rewriting={"calls.vcf.gz": (*DEFAULT_REWRITES, "swap_homozygous")})


def het_count(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Heterozygous sites of one sample, phased or not (trap: counting only ``0/1``; at
    warmup every het is ``0/1``)."""
    n_sites, n_samples = _SIZES[difficulty]
    samples = [_SAMPLES[i] for i in rng.choice(len(_SAMPLES), size=n_samples, replace=False)]
    target = int(rng.integers(n_samples))
    sample, col = samples[target], 10 + target
    lines, calls, gts = _sites(rng, n_sites, samples, difficulty != "warmup")
    a, b = calls.alleles[:, target, 0], calls.alleles[:, target, 1]
    is_het = ((a != b) & ~calls.missing[:, target]).tolist()
    mine = [row[target] for row in gts]
    answer, careless = sum(is_het), sum(1 for g in mine if g == "0/1")
    phased = sum(1 for g, h in zip(mine, is_het, strict=True) if h and "|" in g)
    if difficulty != "warmup" and not (phased and careless < answer):
        raise RuntimeError("het_count: the trap does not bite; generator bug")
    header = _HEADER + "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO",
                                  "FORMAT", *samples]) + "\n"
    question = (f"At how many sites in calls.vcf.gz is sample {sample} heterozygous? Sites "
                f"where {sample}'s genotype is missing do not count. Answer with one integer.")
    grep = f"zcat calls.vcf.gz | grep -v '^#' | cut -f{col} | grep -c '^0/1'"
    trap = Trap(
        description="counting the string 0/1 misses phased hets (0|1, 1|0) and multi-allelic ones",
        careless_solution=(
            turn(grep, node("test", f"{sample} is heterozygous (0/1) at {careless} sites"), [
                check("range", "some heterozygous sites", verdict(f"test \"$({grep})\" -gt 0"))]),
            final(str(careless))),
        wrong_answer=str(careless))
    return Instance(files={"calls.vcf.gz": gz(header + "\n".join(lines) + "\n")},
                    question=question, answer=str(answer),
                    grader={"kind": "numeric", "abs_tol": 0},
                    solution=_solution(sample, col, n_sites, answer, phased, careless,
                                       sum(1 for g, h in zip(mine, is_het, strict=True)
                                           if h and max(map(int, re.split("[|/]", g))) > 1)),
                    trap=trap,
                    tags=("vcf", "genotypes", "phasing"), reference=_reference(sample, col - 1))
