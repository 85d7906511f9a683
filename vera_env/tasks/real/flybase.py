"""Real annotation (GFF3): exons per mRNA in FlyBase's annotation of *D. melanogaster*.

Why this trap. FlyBase's GFF3 writes an exon shared by several mRNAs once, with a
comma-separated ``Parent=FBtr1,FBtr2,FBtr3``. ``grep 'Parent=FBtr2'`` only finds the
exons where the mRNA is listed *first* (attributes are ``key=value;`` pairs, values may
be lists): l(2)gl-RD has 9 exons, and the grep finds 2.

The answer is computed here by parsing the attributes; the tests recompute it with an
awk count of the Parent lists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial
from typing import NamedTuple

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
    recounted,
)
from vera_env.tasks.undetermined import with_clause
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["GffExons", "exon_count", "gff_attributes", "gff_exons"]

_GFF = "dmel.gff"


def gff_attributes(column9: str) -> dict[str, str]:
    """GFF3 ``key=value;key=value`` attributes (values left as written, lists unsplit)."""
    return dict(kv.split("=", 1) for kv in column9.strip().split(";") if "=" in kv)


def _gff_question(mrna: str) -> str:
    return with_clause(
        f"{_GFF} is FlyBase's GFF3 annotation (release 5.49) of the start of Drosophila "
        f"melanogaster chromosome arm 2L. How many exons does the mRNA with ID {mrna} have "
        "(FlyBase exon features that belong to it)? Answer with one integer.")


_PY = ("python3 -c \"x = [l.rstrip('\\n').split('\\t') for l in open('@F@') if not l.startswith("
       "'#')]; a = [(int(f[3]), int(f[4]), dict(kv.split('=', 1) for kv in f[8].split(';') if "
       "'=' in kv)['Parent'].split(',')) for f in x if len(f) == 9 and f[1] == 'FlyBase' and "
       "f[2] == 'exon']; e = [(s, t, p) for s, t, p in a if '@T@' in p]; m = [(int(f[3]), "
       "int(f[4])) for f in x if len(f) == 9 and f[2] == 'mRNA' and ('ID=@T@;' in f[8] + ';')]; ")
"""The FlyBase exons listing the mRNA (``e``: start, end, Parent list) and the mRNA's
own span (``m``), parsed by python: the second route of the GFF checks."""
_MINE = ("awk -F'\\t' '$2 == \"FlyBase\" && $3 == \"exon\" { n = split($9, a, \";\"); for (i = 1; "
         "i <= n; i++) if (a[i] ~ /^Parent=/) { k = split(substr(a[i], 8), p, \",\"); for (j = 1; "
         "j <= k; j++) if (p[j] == \"@T@\") print } }' @F@ > exons.gff")
_PARENTS = "awk -F'\\t' '$2 == \"FlyBase\" && $3 == \"exon\"' @F@ | grep -o 'Parent=[^;]*'"


def _gff_load_turn(v: dict[str, object], py: Callable[[str], str]) -> str:
    """The mRNA and the exon lines whose Parent list names it: their count and span."""
    command = fill("awk -F'\\t' '$3 == \"mRNA\" && $9 ~ /^ID=@T@;/' @F@\n" + _MINE
                   + "\nwc -l < exons.gff\ncut -f4,5,9 exons.gff", **v)
    return turn(command, node("load", fill("@ANS@ FlyBase exon lines name @T@ among their "
                                           "Parents; they span its mRNA, @LO@ to @HI@", **v),
                              "exons.gff"), [
        check("conservation", fill("@ANS@ exon lines name @T@ in their Parent list", **v),
              py("len(open('exons.gff').readlines()) == len(e) == @ANS@")),
        check("range", fill("the mRNA runs from its first exon's start to its last exon's end: "
                            "@LO@ to @HI@", **v),
              py("m == [(min(s for s, _, _ in e), max(t for _, t, _ in e))] == [(@LO@, @HI@)] and "
                 "all(@LO@ <= int(l.split('\\t')[3]) <= int(l.split('\\t')[4]) <= @HI@ for l in "
                 "open('exons.gff'))"))])


def _gff_solution(mrna: str, exons: list[tuple[int, int, list[str]]]) -> tuple[str, ...]:
    """Find the exon lines whose Parent list names the mRNA, credit every Parent of a
    shared exon, read the mRNA's count.

    The checks recount from the GFF3 what the count is built from: the exon lines naming
    it, the span they cover (an mRNA runs from its first exon's start to its last exon's
    end) and the other mRNAs its shared exons belong to. (How few exons list it first is
    the trap, not evidence: that count does not follow the answer, so no check pins it.)
    """
    partners = sorted({p for _, _, parents in exons for p in parents} - {mrna})
    v = {"F": _GFF, "T": mrna, "ANS": len(exons), "P": len(partners),
         "LO": min(s for s, _, _ in exons), "HI": max(e for _, e, _ in exons),
         "S": sum(len(parents) > 1 for _, _, parents in exons)}
    py = python_check(_PY, v)
    return (
        _gff_load_turn(v, py),
        turn(fill(_PARENTS + " | cut -d= -f2 | tr , '\\n' | sort | uniq -c | awk '{ print $2 "
                  "\"\\t\" $1 }' > exons_per_mrna.tsv\nwc -l < exons_per_mrna.tsv\ncut -f9 "
                  "exons.gff | grep -o 'Parent=[^;]*' | cut -d= -f2 | tr , '\\n' | sort | uniq -c",
                  **v),
             node("transform", fill("exons per mRNA, every Parent of a shared exon credited: "
                                    "@S@ of @T@'s @ANS@ exons are shared, with @P@ other mRNAs",
                                    **v), "exons_per_mrna.tsv", "n1"), [
                 check("conservation", fill("@T@'s row counts @ANS@ exons", **v), recounted(
                     fill("awk -F'\\t' '$1 == \"@T@\" { print $2 }' exons_per_mrna.tsv", **v),
                     py("len(e)"), len(exons))),
                 check("conservation", fill("its shared exons also belong to @P@ other mRNAs: "
                                            + ", ".join(partners), **v),
                       py("sorted({q for _, _, p in e for q in p} - {'@T@'}) == sorted({q for l "
                          "in open('exons.gff') for q in l.split('Parent=')[1].split(';')[0]"
                          ".strip().split(',')} - {'@T@'}) == " + repr(partners)))]),
        turn(fill("awk -F'\\t' '$1 == \"@T@\" { print $2 }' exons_per_mrna.tsv > n.txt\ncat n.txt",
                  **v),
             node("test", fill("@T@ has @ANS@ exons", **v), "n.txt", "n2"), [
                 check("invariance", fill("a python parse of the Parent lists agrees: @ANS@", **v),
                       py("len(e) == int(open('n.txt').read()) == @ANS@")),
                 check("range", fill("the @ANS@ exons counted, those of exons.gff, all lie in "
                                     "the mRNA's span @LO@ to @HI@", **v),
                       py("int(open('n.txt').read()) == len(open('exons.gff').readlines()) and "
                          "m == [(@LO@, @HI@)] and all(@LO@ <= s <= t <= @HI@ for s, t, _ in e)"))]),
        final(str(len(exons))),
    )


def _exons_of(content: bytes, mrna: str) -> list[tuple[int, int, list[str]]]:
    """(start, end, Parent list) of the FlyBase exons whose Parent list names ``mrna``."""
    out = []
    for line in content.decode().splitlines():
        f = line.split("\t")
        if len(f) == 9 and f[1] == "FlyBase" and f[2] == "exon":
            parents = gff_attributes(f[8]).get("Parent", "").split(",")
            if mrna in parents:
                out.append((int(f[3]), int(f[4]), parents))
    return out


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


def _gff_solve(contents: Contents, *, mrna: str) -> str:
    """The reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return str(gff_exons(content_of(contents, _GFF)).every[mrna])


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
        solve=partial(_gff_solve, mrna=mrna),
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
                        solution=_gff_solution(mrna, _exons_of(data, mrna)),
                        trap=trap, tags=("gff3", "multi-valued-attributes", "gffutils"),
                        reference=_gff_reference(mrna))
    probe = Probe("FBtr0081624", _gff_question("FBtr0081624"),
                  f"awk -F'\\t' '$3 == \"mRNA\"' {_GFF} | grep -o 'ID=[^;]*' | cut -d= -f2",
                  f"grep -vc '^#' {_GFF}", records)
    reads = Census(fill(_MINE.replace("> exons.gff", "| wc -l"), F=_GFF, T=mrna), every[mrna],
                   f"FlyBase exon lines naming {mrna}")
    return RealInstance(instance, _GFF, probe, reads=reads)
