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
import re
from collections.abc import Mapping

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
from vera_env.tasks.real.kinds import Probe, RealInstance, careless_trap
from vera_env.tasks.undetermined import with_clause

__all__ = ["het_sites"]

_FILE = "chr22.vcf.gz"


def _question(sample: str) -> str:
    return with_clause(
        f"{_FILE} holds 1000 Genomes calls on human chromosome 22 for five samples. At how "
        f"many sites is sample {sample} heterozygous (two different alleles called)? Answer "
        "with one integer.")


def _solution(sample: str, col: int, n_sites: int, typed: int, answer: int, flipped: int
              ) -> tuple[str, ...]:
    v = {"F": _FILE, "S": sample, "C": col, "N": n_sites, "D": typed, "ANS": answer, "R": flipped}
    body = "zcat @F@ | grep -v '^#'"
    return (
        turn(fill("zcat @F@ | grep '^#CHROM' | tr '\\t' '\\n' | awk '$0 == \"@S@\" { print NR }'"
                  " > col.txt\ncat col.txt\n" + body + " | wc -l", **v),
             node("load", fill("@S@ is column @C@ of @N@ sites", **v), "col.txt"), [
                 check("type", fill("column @C@ is @S@; @D@ of @N@ sites have its genotype a|b or "
                                    "a/b", **v), verdict(fill(
                     "test \"$(zcat @F@ | grep '^#CHROM' | cut -f\"$(cat col.txt)\")\" = @S@ && test "
                     "\"$(" + body + " | cut -f\"$(cat col.txt)\" | grep -cE '^[0-9.]+[|/][0-9.]+(:|$)')\""
                     " -eq @D@", **v)))]),
        turn(fill(body + " | cut -f\"$(cat col.txt)\" | cut -d: -f1 > gt.txt\nsort gt.txt | "
                  "uniq -c\nawk -F'[|/]' '$1 != $2 && $1 != \".\" && $2 != \".\"' gt.txt | wc -l "
                  "> n.txt\ncat n.txt", **v),
             node("test", fill("@S@ is heterozygous at @ANS@ sites, @R@ of them phased 1|0",
                               **v), "n.txt", "n1"), [
                 check("conservation", "one genotype per site", verdict(fill(
                     "test \"$(wc -l < gt.txt)\" -eq @N@ && test \"$(" + body + " | wc -l)\" -eq "
                     "@N@", **v))),
                 check("invariance", "a python recount from the VCF agrees", fill(
                     "python3 -c \"import gzip, re; r = [l.rstrip('\\n').split('\\t') for l in "
                     "gzip.open('@F@', 'rt')]; h = [x for x in r if x[0] == '#CHROM'][0]; j = "
                     "h.index('@S@'); g = [re.split('[|/]', x[j].split(':')[0]) for x in r if not "
                     "x[0].startswith('#')]; print(sum(a != b and '.' not in (a, b) for a, b in g)"
                     " == int(open('n.txt').read()) == @ANS@)\"", **v))]),
        final(str(answer)),
    )


def het_sites(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Heterozygous sites of one sample (trap: ``1|0`` not counted)."""
    data = files["chr22.vcf.gz"]
    lines = gzip.decompress(data).decode().splitlines()
    header = next(line for line in lines if line.startswith("#CHROM")).split("\t")
    rows = [line.split("\t") for line in lines if not line.startswith("#")]
    samples = header[9:]
    sample = samples[int(rng.integers(len(samples)))]
    col = header.index(sample)
    gts = [re.split(r"[|/]", row[col].split(":")[0]) for row in rows]
    typed = sum(1 for row in rows if re.fullmatch(r"[0-9.]+[|/][0-9.]+", row[col].split(":")[0]))
    het = [(a, b) for a, b in gts if a != b and "." not in (a, b)]
    answer = len(het)
    wrong = sum(1 for a, b in het if (a, b) == ("0", "1"))
    careless = f"zcat {_FILE} | grep -v '^#' | cut -f{col + 1} | cut -d: -f1 | grep -cE '^0[|/]1$'"
    trap = careless_trap("counting 0/1 and 0|1 misses phased 1|0 heterozygotes", careless,
                         f"{sample}: {wrong} het sites", "some het sites",
                         f"test \"$({careless})\" -gt 0", wrong)
    instance = Instance(files={_FILE: data}, question=_question(sample), answer=str(answer),
                        grader={"kind": "numeric", "abs_tol": 0},
                        solution=_solution(sample, col + 1, len(rows), typed, answer, answer - wrong),
                        trap=trap, tags=("vcf", "phasing", "1000-genomes", "variantannotation"))
    probe = Probe("NA12878", _question("NA12878"),
                  f"zcat {_FILE} | grep '^#CHROM' | cut -f10- | tr '\\t' '\\n'",
                  f"zcat {_FILE} | grep -vc '^#'", len(rows))
    return RealInstance(instance, _FILE, probe)
