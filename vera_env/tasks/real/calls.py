"""Real variant calls (VCF): heterozygous sites of a 1000 Genomes sample on chr22.

Why this trap. The calls are *phased*: a heterozygote is ``0|1`` or ``1|0`` depending
on which haplotype carries the ALT allele, and for HG00097 the ``1|0`` calls outnumber
``0|1`` two to one. Counting "0 then 1" (``grep -cE '0[|/]1'``), the habit from unphased
files, misses every ``1|0``. The sample is looked up by name in the ``#CHROM`` header.

The answer is computed here from the allele pairs of the sample's GT field; the tests
recount with awk on the same column found by a different route (the header split in
Python vs ``tr`` in shell).
"""

from __future__ import annotations

import gzip
import random
import re
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn
from vera_env.tasks.builtin.solvers import aimed, edit_lines, lines_of, rejoin, tsv_fields
from vera_env.tasks.real.kinds import (
    Census,
    Probe,
    RealInstance,
    careless_trap,
    content_of,
    field_mutator,
    python_check,
    recounted,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import (
    DEFAULT_REWRITES,
    Contents,
    Mutator,
    Reference,
)

__all__ = ["het_sites", "sample_genotypes"]

_FILE = "chr22.vcf.gz"


def _question(sample: str) -> str:
    return with_clause(
        f"{_FILE} holds 1000 Genomes calls on human chromosome 22 for five samples. At how "
        f"many sites is sample {sample} heterozygous (two different alleles called)? Answer "
        "with one integer.")


_CALLS = ("python3 -c \"import gzip, re; r = [l.rstrip('\\n').split('\\t') for l in gzip.open("
          "'@F@', 'rt')]; j = [x for x in r if x[0] == '#CHROM'][0].index('@S@'); g = [(int(x[1]), "
          "x[j].split(':')[0]) for x in r if not x[0].startswith('#')]; het = [(p, c) for p, c in "
          "g if (lambda u: len(u) == 2 and u[0] != u[1] and '.' not in u)(re.split('[|/]', c))]; ")
"""The sample's heterozygous calls (``het``: position, genotype), by python with the
column found by name: the second route of the VCF checks."""


_BODY = "zcat @F@ | grep -v '^#'"
_HETS = "awk -F'[|/]' '$1 != $2 && $1 != \".\" && $2 != \".\"' gt.txt"


def _load_turn(v: dict[str, object], py: Callable[[str], str]) -> str:
    """The sample's column and genotypes: its 1|0, 0|1 and other het calls recounted."""
    command = fill("zcat @F@ | grep '^#CHROM' | tr '\\t' '\\n' | awk '$0 == \"@S@\" { print NR }' "
                   "> col.txt\ncat col.txt\n" + _BODY + " | cut -f\"$(cat col.txt)\" | cut -d: -f1 "
                   "> gt.txt\nsort gt.txt | uniq -c", **v)
    column = fill("test \"$(zcat @F@ | grep '^#CHROM' | cut -f\"$(cat col.txt)\")\" = @S@ && ", **v)
    return turn(command, node("load", fill("@S@ is column @C@; its genotypes, one per site: "
                                           "@R@ het calls phased 1|0, @W@ 0|1, no other", **v),
                              "gt.txt"), [
        check("type", fill("column @C@ is @S@: @R@ of its calls are 1|0", **v),
              column + recounted("grep -cxF '1|0' gt.txt", py("sum(c == '1|0' for _, c in het)"),
                                 v["R"])),
        check("conservation", fill("@W@ of its calls are 0|1", **v), recounted(
            "grep -cxE '0[|/]1' gt.txt", py("sum(c in ('0|1', '0/1') for _, c in het)"), v["W"])),
        check("type", "every other het call would be unphased or multi-allelic: none",
              recounted(_HETS + " | grep -cvxE '0[|]1|1[|]0|0/1'",
                        py("sum(c not in ('0|1', '1|0', '0/1') for _, c in het)"), 0))])


def _solution(sample: str, col: int, het: list[tuple[int, str]], answer: int
              ) -> tuple[str, ...]:
    """Find the sample's column, take its genotypes, keep the heterozygous sites.

    The checks recount from the VCF what the count is built from: the sample's ``1|0``
    and ``0|1`` calls and any other heterozygous call, where the het sites lie, how
    many there are, and what counting "0 then 1" alone (the trap) would say.
    """
    flipped = sum(c == "1|0" for _, c in het)
    v = {"F": _FILE, "S": sample, "C": col, "ANS": answer, "R": flipped,
         "W": sum(c in ("0|1", "0/1") for _, c in het), "LO": min(p for p, _ in het),
         "HI": max(p for p, _ in het)}
    py = python_check(_CALLS, v)
    return (
        _load_turn(v, py),
        turn(fill(_BODY + " | cut -f2,\"$(cat col.txt)\" | cut -d: -f1 | awk -F'[\\t|/]' '$2 != $3 "
                  "&& $2 != \".\" && $3 != \".\"' > het.tsv\nwc -l < het.tsv\nsed -n '1p;$p' het.tsv",
                  **v),
             node("transform", fill("@ANS@ heterozygous sites of @S@, from position @LO@ to "
                                    "@HI@, @R@ of them phased 1|0", **v), "het.tsv", "n1"), [
                 check("conservation", fill("one line per het site: @ANS@", **v),
                       recounted("wc -l < het.tsv", py("len(het)"), answer)),
                 check("range", fill("het sites from position @LO@ to @HI@", **v),
                       py("[min(p for p, _ in het), max(p for p, _ in het)] == (lambda q: [min(q), "
                          "max(q)])([int(l.split()[0]) for l in open('het.tsv')]) == [@LO@, @HI@]")),
                 check("conservation", fill("@R@ of them 1|0", **v), recounted(
                     "grep -c '1|0$' het.tsv", py("sum(c == '1|0' for _, c in het)"), flipped))]),
        turn("wc -l < het.tsv > n.txt\ncat n.txt",
             node("test", fill("@S@ is heterozygous at @ANS@ sites, @R@ of them phased 1|0",
                               **v), "n.txt", "n2"), [
                 check("invariance", "a python recount from the VCF agrees",
                       py("len(het) == int(open('n.txt').read()) == @ANS@")),
                 check("range", fill("counting 0|1 alone (the unphased habit) finds @W@, fewer "
                                     "than n.txt", **v), recounted(
                     fill(_BODY + " | cut -f@C@ | cut -d: -f1 | grep -cE '^0[|/]1$'", **v),
                     py("sum(c in ('0|1', '0/1') for _, c in het)"), v["W"],
                     fill("test \"$(cat n.txt)\" -gt @W@", **v)))]),
        final(str(answer)),
    )


def _het_calls(content: bytes, col: int) -> list[tuple[int, str]]:
    """(position, genotype) of the heterozygous calls in 0-based column ``col``."""
    out = []
    for line in content.decode().splitlines():
        if line and not line.startswith("#"):
            fields = line.split("\t")
            gt = fields[col].split(":")[0]
            if _het(re.split(r"[|/]", gt)):
                out.append((int(fields[1]), gt))
    return out


def sample_genotypes(content: bytes, sample: str) -> tuple[int, list[list[str]], int]:
    """(the sample's column, its alleles at every site, sites typed ``a|b`` or ``a/b``) in
    a decoded VCF.

    Raises:
        ValueError: No ``#CHROM`` line naming the sample, or a site without its column.
    """
    lines = content.decode().splitlines()
    header = next((line for line in lines if line.startswith("#CHROM")), None)
    if header is None:
        raise ValueError("VCF without a #CHROM header line")
    col = header.split("\t").index(sample)  # ValueError if the sample is not there
    try:
        calls = [line.split("\t")[col].split(":")[0]
                 for line in lines if line and not line.startswith("#")]
    except IndexError as exc:
        raise ValueError(f"a site without column {col + 1} ({sample})") from exc
    typed = sum(1 for gt in calls if re.fullmatch(r"[0-9.]+[|/][0-9.]+", gt))
    return col, [re.split(r"[|/]", gt) for gt in calls], typed


def _het(alleles: list[str]) -> bool:
    a, b = alleles  # ValueError for a haploid or triploid call: not this question
    return a != b and "." not in (a, b)


def _solve(contents: Contents, *, sample: str) -> str:
    """The reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return str(sum(map(_het, sample_genotypes(content_of(contents, _FILE), sample)[1])))


def _reference(sample: str, col: int) -> Reference:
    """Sites are order-free, meta lines do not matter, and sites where the sample is not
    heterozygous are never read; aimed mutants make one het call homozygous or one
    homozygous reference call het (keeping the other FORMAT fields)."""
    def gt(record: bytes) -> list[bytes] | None:
        fields = record.rstrip(b"\r\n").split(b"\t")
        if record.startswith(b"#") or len(fields) <= col:
            return None
        return re.split(rb"[|/]", fields[col].split(b":")[0])

    def het(record: bytes) -> bool:
        alleles = gt(record)
        return alleles is not None and len(alleles) == 2 and _het([a.decode() for a in alleles])

    def not_het(record: bytes) -> bool:
        alleles = gt(record)
        return alleles is not None and len(alleles) == 2 and not het(record)

    def set_gt(call: bytes, pick: Callable[[bytes], bool]) -> Mutator:
        def edit(fields: list[bytes]) -> bool:
            fields[col] = call + fields[col][3:]
            return True
        return field_mutator(pick, b"\t", edit)

    def hom_ref(record: bytes) -> bool:
        return gt(record) == [b"0", b"0"]

    return Reference(
        solve=partial(_solve, sample=sample),
        preserving={_FILE: ("recompress", "shuffle_records", "add_comment", "drop_irrelevant")},
        irrelevant={_FILE: not_het},
        mutators={_FILE: (set_gt(b"0|0", het), set_gt(b"1|0", hom_ref))},
        controls={_FILE: aimed(_requalified)},
        # homozygous calls swapped too: a het count keeps, a hash of the genotypes dies
        rewriting={_FILE: (*DEFAULT_REWRITES, "swap_homozygous")})


def _requalified(content: bytes, rng: random.Random) -> bytes | None:
    """Every site's QUAL re-scored and every call's genotype likelihoods (the FORMAT
    fields after GT and DS) moved by 0.01: no genotype question reads them, and every
    record changes from its start to its end, so a fingerprint of any slice of the
    sites fails this control."""
    edits = {}
    for i, line in enumerate(lines_of(content)):
        fields = tsv_fields(line)
        if line.startswith(b"#") or len(fields) < 8:
            continue
        fields[5] = b"%d" % rng.randint(10, 9_999)
        fields[9:] = [_moved_likelihoods(call, rng) for call in fields[9:]]
        edits[i] = rejoin(fields, line)
    return edit_lines(content, edits) if edits else None


def _moved_likelihoods(call: bytes, rng: random.Random) -> bytes:
    parts = call.split(b":")
    if len(parts) < 3:
        return call
    try:
        values = [float(x) + rng.choice((-0.01, 0.01)) for x in parts[-1].split(b",")]
    except ValueError:
        return call
    parts[-1] = b",".join(b"%.2f" % v for v in values)
    return b":".join(parts)


def het_sites(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Heterozygous sites of one sample (trap: ``1|0`` not counted)."""
    data = files["chr22.vcf.gz"]
    content = gzip.decompress(data)
    header = next(line for line in content.decode().splitlines()
                  if line.startswith("#CHROM")).split("\t")
    samples = header[9:]
    sample = samples[int(rng.integers(len(samples)))]
    col, gts, typed = sample_genotypes(content, sample)
    het = [(a, b) for a, b in gts if _het([a, b])]
    answer = len(het)
    wrong = sum(1 for a, b in het if (a, b) == ("0", "1"))
    careless = f"zcat {_FILE} | grep -v '^#' | cut -f{col + 1} | cut -d: -f1 | grep -cE '^0[|/]1$'"
    trap = careless_trap("counting 0/1 and 0|1 misses phased 1|0 heterozygotes", careless,
                         f"{sample}: {wrong} het sites", "some het sites",
                         f"test \"$({careless})\" -gt 0", wrong)
    instance = Instance(files={_FILE: data}, question=_question(sample), answer=str(answer),
                        grader={"kind": "numeric", "abs_tol": 0},
                        solution=_solution(sample, col + 1, _het_calls(content, col), answer),
                        trap=trap, tags=("vcf", "phasing", "1000-genomes", "variantannotation"),
                        reference=_reference(sample, col))
    probe = Probe("NA12878", _question("NA12878"),
                  f"zcat {_FILE} | grep '^#CHROM' | cut -f10- | tr '\\t' '\\n'",
                  f"zcat {_FILE} | grep -vc '^#'", len(gts))
    reads = Census(f"zcat {_FILE} | grep -v '^#' | cut -f{col + 1} | cut -d: -f1 | awk -F'[|/]' "
                   "'$1 != $2 && $1 != \".\" && $2 != \".\"' | wc -l", answer,
                   f"heterozygous calls of {sample}")
    return RealInstance(instance, _FILE, probe, reads=reads)
