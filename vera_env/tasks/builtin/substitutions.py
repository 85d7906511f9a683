"""Variant table family: the transition/transversion ratio of biallelic SNVs.

Why this trap. Ti/Tv is the first sanity number of any call set (about 2.0-2.1 for
human whole genomes), and the first way anyone computes it is "A<->G and C<->T are
transitions, everything else is a transversion". A real VCF also holds indels
(``REF=A ALT=AT``) and multi-allelic sites (``ALT=G,T``); in that one-liner they all fall
into "everything else", so the ratio comes out well below 2 -- low, but in the range a
noisy call set really has, so it does not look like a bug.

The ground truth is counted on the REF/ALT pairs the generator draws for its biallelic
SNVs; tests recount it by parsing the written VCF.

Each instance's `Reference` recounts from the decoded VCF (sites in any order, meta
lines free); indels and multi-allelic sites are never read, so they may be dropped. The
aimed mutants change the fewest biallelic SNVs that move the ratio past the grader's
tolerance (one at the easy and medium sizes): transitions made transversions,
transversions made indels, or transitions made multi-allelic -- the first moves both
classes but not the SNV count, the second the transversions only, the third the
transitions only, so checks of the three counts give distinct evidence.
"""

from __future__ import annotations

import random
from functools import partial

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
from vera_env.tasks.builtin.solvers import aimed, content_of, edit_lines, lines_of, moved, vcf_table
from vera_env.tasks.model import Trap
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["TRANSITIONS", "titv"]

TRANSITIONS = frozenset({"AG", "GA", "CT", "TC"})
_SIZES = {"warmup": 40, "easy": 400, "medium": 4000, "hard": 40_000, "xl": 400_000}  # sites
_BASES = "ACGT"
_HEADER = """##fileformat=VCFv4.2
##source=vera_env-builtin
##reference=GRCh38
##contig=<ID=chr20,length=64444167>
##INFO=<ID=DP,Number=1,Type=Integer,Description="Total depth">
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tNA12878\tNA12891
"""


def _alts(rng: np.random.Generator, refs: np.ndarray, kinds: np.ndarray, p_transition: float
          ) -> list[str]:
    """ALT of every site: a transition or transversion (biallelic SNV), two other bases
    (multi-allelic SNV), or REF plus 1-5 bases (an indel)."""
    n = len(refs)
    partner = refs ^ 2  # A<->G and C<->T: bases are indexed A=0, C=1, G=2, T=3
    transversion = (refs + np.where(rng.random(n) < 0.5, 1, 3)) % 4
    snv = np.where(rng.random(n) < p_transition, partner, transversion)
    others = (refs[:, None] + 1 + np.argsort(rng.random((n, 3)), axis=1)) % 4
    extra = rng.integers(0, 4, (n, 5))
    width = rng.integers(1, 6, n)
    out = []
    for i, kind in enumerate(kinds.tolist()):
        if kind == 0:
            out.append(_BASES[snv[i]])
        elif kind == 1:
            out.append(f"{_BASES[others[i, 0]]},{_BASES[others[i, 1]]}")
        else:
            out.append(_BASES[refs[i]] + "".join(_BASES[b] for b in extra[i, :width[i]]))
    return out


def _sites(rng: np.random.Generator, n_sites: int, trapped: bool = True
           ) -> tuple[list[str], list[tuple[str, str]]]:
    """VCF body lines and the (REF, ALT) of every biallelic SNV; without ``trapped``
    (warmup) every site is one, so "not a transition" is a transversion."""
    kinds = rng.choice(3, size=n_sites, p=[0.8, 0.07, 0.13] if trapped else [1.0, 0.0, 0.0])
    p_transition = float(rng.uniform(0.64, 0.7))
    positions = np.cumsum(rng.integers(1, 3000, n_sites)) + 60_000
    refs = rng.integers(0, 4, n_sites)
    alts = _alts(rng, refs, kinds, p_transition)
    deletion = (kinds == 2) & (rng.random(n_sites) < 0.5)
    alleles = np.sort(rng.random((n_sites, 2, 2)), axis=2)  # uniform over 0..n_alt below
    quals, depths = rng.uniform(30, 900, n_sites), rng.integers(10, 80, n_sites)
    lines, snvs = [], []
    for i in range(n_sites):
        ref, alt = _BASES[refs[i]], alts[i]
        if deletion[i]:
            ref, alt = alt, ref
        if kinds[i] == 0:
            snvs.append((ref, alt))
        n_alleles = alt.count(",") + 2
        gts = [f"{int(a * n_alleles)}/{int(b * n_alleles)}" for a, b in alleles[i].tolist()]
        lines.append(f"chr20\t{positions[i]}\t.\t{ref}\t{alt}\t{quals[i]:.1f}\tPASS\t"
                     f"DP={depths[i]}\tGT\t" + "\t".join(gts))
    return lines, snvs


_CLASSIFY = ("zcat variants.vcf.gz | grep -v '^#' | awk -F'\\t' '{ if ($5 ~ /,/) k = "
             "\"multiallelic\"; else if (length($4) == 1 && length($5) == 1) k = \"snv\"; "
             "else k = \"indel\"; print k }' | sort | uniq -c | awk '{ print $2 \"\\t\" $1 }' "
             "> site_classes.tsv\ncat site_classes.tsv")
_PAIRS = ("zcat variants.vcf.gz | grep -v '^#' | awk -F'\\t' '$5 !~ /,/ && length($4) == 1 "
          "&& length($5) == 1 { print toupper($4 $5) }' > snv_pairs.txt\n"
          "awk '{ if ($1 ~ /^(AG|GA|CT|TC)$/) ti++; else tv++ } END { print ti + 0, tv + 0 }' "
          "snv_pairs.txt > titv_counts.txt\ncat titv_counts.txt")


def _solution(n_sites: int, n_snv: int, n_multi: int, ti: int, answer: str) -> tuple[str, ...]:
    """Three nodes, each over the SNVs, the transitions and the transversions (which the
    aimed mutants move in different combinations) and the ratio: site totals would die
    on a control that drops indels or multi-allelic sites."""
    v = {"S": n_sites, "X": n_snv, "ANS": answer, "TI": ti, "TV": n_snv - ti}
    snvs = ("zcat variants.vcf.gz | grep -v '^#' | awk -F'\\t' '$5 !~ /,/ && length($4) == 1 "
            "&& length($5) == 1 { print toupper($4 $5) }'")
    return (
        turn(_CLASSIFY, node("load", f"{n_sites} sites: {n_snv} biallelic SNVs, {n_multi} "
                                     f"multi-allelic, {n_sites - n_snv - n_multi} indels",
                             "site_classes.tsv"), [
            check("range", "biallelic SNVs are the expected number", verdict(fill(
                "test \"$(awk '$1 == \"snv\" { print $2 }' site_classes.tsv)\" -eq @X@", **v))),
            check("range", fill("@TI@ of the SNVs are A<->G or C<->T", **v), verdict(fill(
                f"test \"$({snvs} | grep -cxE 'AG|GA|CT|TC')\" -eq @TI@", **v))),
            check("range", fill("@TV@ of the SNVs are transversions", **v), verdict(fill(
                f"test \"$({snvs} | grep -cxE 'AC|CA|AT|TA|CG|GC|GT|TG')\" -eq @TV@", **v)))]),
        turn(_PAIRS, node("transform", f"{n_snv} biallelic SNVs: {ti} transitions, "
                                       f"{n_snv - ti} transversions", "titv_counts.txt", "n1"), [
            check("type", "each pair is two different bases, one per SNV", fill(
                "awk '$1 !~ /^[ACGT][ACGT]$/ || substr($1, 1, 1) == substr($1, 2, 1) { bad = 1 } "
                "END { print (!bad && NR == @X@) ? \"True\" : \"False\" }' snv_pairs.txt", **v)),
            check("invariance", "grep finds the same transitions", verdict(fill(
                "test \"$(grep -cxE 'AG|GA|CT|TC' snv_pairs.txt)\" -eq "
                "\"$(cut -d' ' -f1 titv_counts.txt)\" && test \"$(cut -d' ' -f1 "
                "titv_counts.txt)\" -eq @TI@", **v))),
            check("conservation", "the transversions are the other SNVs", verdict(fill(
                "test $(( $(wc -l < snv_pairs.txt) - $(cut -d' ' -f1 titv_counts.txt) )) -eq "
                "\"$(cut -d' ' -f2 titv_counts.txt)\" && test \"$(cut -d' ' -f2 "
                "titv_counts.txt)\" -eq @TV@", **v)))]),
        turn("awk '{ printf \"%.3f\\n\", $1 / $2 }' titv_counts.txt > titv.txt\ncat titv.txt",
             node("interpret", f"Ti/Tv of the biallelic SNVs is {answer}", "titv.txt", "n2"), [
                 check("range", "the ratio recomputes from the counts", fill(
                     "awk 'NR == FNR { r = $1; next } { d = $1 / $2 - r; print (d < 0.0005 && "
                     "d > -0.0005 && r == @ANS@) ? \"True\" : \"False\" }' titv.txt "
                     "titv_counts.txt", **v)),
                 check("range", "the numerator counts only biallelic SNV transitions", fill(
                     "awk '{ print ($1 == @TI@) ? \"True\" : \"False\" }' titv_counts.txt", **v)),
                 check("range", "indels and multi-allelic sites are not in the denominator",
                       verdict(fill("test \"$(grep -vcxE 'AG|GA|CT|TC' snv_pairs.txt)\" -eq @TV@",
                                    **v)))]),
        final(answer),
    )


# ----- the reference -----

_TOL = 0.001


def _snv(ref: str, alt: str) -> str | None:
    """``REF + ALT`` (uppercase) of a biallelic SNV, else None."""
    pair = (ref + alt).upper()
    return pair if len(ref) == len(alt) == 1 and pair[0] != pair[1] and set(pair) <= set(_BASES) \
        else None


def _ratio(ti: int, tv: int) -> str:
    return f"{ti / tv:.3f}" if tv else CANNOT_DETERMINE


def _solve(contents: Contents) -> str:
    _, rows = vcf_table(content_of(contents, "variants.vcf.gz"))
    pairs = [p for p in (_snv(row[3], row[4]) for row in rows) if p is not None]
    ti = sum(p in TRANSITIONS for p in pairs)
    return _ratio(ti, len(pairs) - ti)


def _not_snv(record: bytes) -> bool:
    """An indel or a multi-allelic site: the ratio never reads it."""
    fields = record.decode("utf-8", "replace").split("\t")
    return not record.startswith(b"#") and len(fields) > 4 and _snv(fields[3], fields[4]) is None


_AFTER = {"tv": lambda ti, tv, k: (ti - k, tv + k), "indel": lambda ti, tv, k: (ti, tv - k),
          "multi": lambda ti, tv, k: (ti - k, tv)}


def _edit_alt(ref: str, alt: str, kind: str, rng: random.Random) -> str:
    """The new ALT: a transversion (``tv``), an insertion (``indel``), or a second ALT
    base added (``multi``: no longer a biallelic SNV)."""
    if kind == "tv":
        return ("CT" if ref in "AG" else "AG")[rng.randrange(2)]
    if kind == "indel":
        return alt + ref
    return alt + "," + next(b for b in _BASES if b not in (ref, alt.upper()))


def _titv_mutant(content: bytes, rng: random.Random, *, kind: str) -> bytes | None:
    """The fewest transitions made transversions (``tv``), transversions made insertions
    (``indel``), or transitions made multi-allelic (``multi``), that move the ratio past
    the tolerance: the first moves the SNV classes but not their number, the second the
    transversions and the SNVs, the third the transitions and the SNVs."""
    lines = lines_of(content)
    fields = {i: line.decode().split("\t") for i, line in enumerate(lines)
              if not line.startswith(b"#") and line.count(b"\t") >= 4}
    pairs = {i: p for i, f in fields.items() if (p := _snv(f[3], f[4])) is not None}
    ti = sum(p in TRANSITIONS for p in pairs.values())
    tv = len(pairs) - ti
    pool = [i for i, p in pairs.items() if (p in TRANSITIONS) == (kind != "indel")]
    for k in range(1, len(pool) + 1):
        if moved(_ratio(ti, tv), _ratio(*_AFTER[kind](ti, tv, k)), _TOL):
            break
    else:
        return None
    edits = {}
    for i in rng.sample(pool, k):
        f = fields[i]
        f[4] = _edit_alt(f[3].upper(), f[4], kind, rng)
        edits[i] = "\t".join(f).encode()
    return edit_lines(content, edits)


_REFERENCE = Reference(
    solve=_solve,
    preserving={"variants.vcf.gz": ("recompress", "shuffle_records", "add_comment",
                                    "drop_irrelevant")},
    irrelevant={"variants.vcf.gz": _not_snv},
    mutators={"variants.vcf.gz": aimed(*(partial(_titv_mutant, kind=k)
                                         for k in ("tv", "indel", "multi")))})


def titv(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Ti/Tv of biallelic SNVs (trap: indels and multi-allelic sites counted as Tv; at
    warmup there are none)."""
    n_sites = _SIZES[difficulty]
    lines, snvs = _sites(rng, n_sites, difficulty != "warmup")
    ti = sum(1 for ref, alt in snvs if ref + alt in TRANSITIONS)
    answer = f"{ti / (len(snvs) - ti):.3f}"
    wrong = f"{ti / (n_sites - ti):.3f}"  # transitions over every other site
    n_multi = sum(1 for line in lines if "," in line.split("\t")[4])
    careless = ("zcat variants.vcf.gz | grep -v '^#' | awk -F'\\t' '{ if ($4 $5 ~ "
                "/^(AG|GA|CT|TC)$/) ti++; else tv++ } END { printf \"%.3f\\n\", ti / tv }' "
                "> titv.txt\ncat titv.txt")
    trap = Trap(
        description=("'everything that is not a transition is a transversion' counts indels "
                     "and multi-allelic sites as transversions"),
        careless_solution=(
            turn(careless, node("test", f"Ti/Tv is {wrong}", "titv.txt"), [
                check("range", "the ratio is positive",
                      "awk '{ print ($1 > 0) ? \"True\" : \"False\" }' titv.txt")]),
            final(wrong)),
        wrong_answer=wrong)
    question = ("What is the transition/transversion (Ti/Tv) ratio of the biallelic SNVs in "
                "variants.vcf.gz (sites whose REF and ALT are single bases; multi-allelic sites "
                "and indels are not SNVs of this kind)? Give three decimals.")
    return Instance(files={"variants.vcf.gz": gz(_HEADER + "\n".join(lines) + "\n")},
                    question=question, answer=answer,
                    grader={"kind": "numeric", "abs_tol": _TOL},
                    solution=_solution(n_sites, len(snvs), n_multi, ti, answer), trap=trap,
                    tags=("vcf", "ti-tv", "indels", "multi-allelic"), reference=_REFERENCE)
