"""Variant table family: which of three men is the child's father (Mendelian errors)?

Why this trap. The quick way to ask "who is related to whom" is genotype identity: the
share of sites where two samples carry the same genotype. But identity measures
relatedness, not parentage: a full sibling shares both alleles identical-by-descent at
a quarter of the genome, a parent at none, so a brother of the child is *more* identical
to the child (about 0.59 against 0.5 at common sites) than the father is. The candidates
here are the father, the child's brother and an unrelated man, so identity picks the
brother. Parentage is decided by Mendelian consistency instead: given the mother, a
father's genotype can always supply the child's other allele, up to genotyping error.

Genotypes are drawn by transmitting alleles through the pedigree, with missing calls
(``./.``) and a small genotyping error rate. The ground truth is the man the generator
made the father; generation verifies on the written genotypes that he has the fewest
Mendelian errors (by a margin) and that identity picks the brother (else it redraws).
Tests recount both from the VCF.

Each instance's `Reference` recounts the Mendelian errors from the decoded VCF, finding
the samples by name in the ``#CHROM`` line (sites in any order, meta lines free; "cannot
be determined" on a tie or a missing sample). Sites where the mother's or the child's
call is missing are never read, so they may be dropped. The aimed mutants swap the
father's name with another man's in the ``#CHROM`` line (a check that reads columns by
position dies), or make the father inconsistent at just enough sites to lose.
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
from vera_env.tasks.builtin.solvers import aimed, content_of, edit_lines, lines_of, vcf_table
from vera_env.tasks.builtin.variants import genotype_alleles
from vera_env.tasks.model import Trap
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import DEFAULT_REWRITES, Contents, Reference

__all__ = ["mendelian_errors", "trio_parentage"]

_NAMES = ("HG00403", "HG00404", "HG00405", "HG00406", "HG00407", "HG00408", "HG00409",
          "HG00410", "NA19675", "NA19676", "NA19677", "NA19678", "NA19679", "NA19680")
_SIZES = {"warmup": 150, "easy": 400, "medium": 3000, "hard": 20_000, "xl": 200_000}  # sites
_ERROR_RATE, _MISSING_RATE = 0.004, 0.03
_HEADER = """##fileformat=VCFv4.2
##source=vera_env-builtin
##contig=<ID=chr7,length=159345973>
##FORMAT=<ID=GT,Number=1,Type=String,Description="Genotype">
##FORMAT=<ID=DP,Number=1,Type=Integer,Description="Read depth">
"""


def _transmit(rng: np.random.Generator, parent: np.ndarray) -> np.ndarray:
    """One allele per site, drawn from a parent's two."""
    pick = rng.integers(0, 2, parent.shape[0])
    alleles: np.ndarray = parent[np.arange(parent.shape[0]), pick]
    return alleles


def _genotypes(rng: np.random.Generator, n_sites: int, sibling: bool = True
               ) -> dict[str, np.ndarray]:
    """Allele pairs (sites x 2) of mother, father, child, brother and an unrelated man;
    without ``sibling`` (warmup) the "brother" is a second unrelated man, so the man most
    identical to the child is the father."""
    freq = np.clip(rng.beta(0.6, 0.6, n_sites), 0.05, 0.95)

    def founder() -> np.ndarray:
        return (rng.random((n_sites, 2)) < freq[:, None]).astype(np.int64)

    mother, father, unrelated = founder(), founder(), founder()
    child = np.stack([_transmit(rng, mother), _transmit(rng, father)], axis=1)
    brother = (np.stack([_transmit(rng, mother), _transmit(rng, father)], axis=1) if sibling
               else founder())
    return {"mother": mother, "father": father, "child": child, "brother": brother,
            "unrelated": unrelated}


def _gt_strings(rng: np.random.Generator, alleles: np.ndarray) -> list[str]:
    """VCF GT strings with genotyping errors and missing calls applied."""
    n = alleles.shape[0]
    dosage = alleles.sum(axis=1)
    wrong = rng.random(n) < _ERROR_RATE
    dosage = np.where(wrong, (dosage + rng.integers(1, 3, n)) % 3, dosage)
    text = np.array(["0/0", "0/1", "1/1"])[dosage]
    calls: list[str] = np.where(rng.random(n) < _MISSING_RATE, "./.", text).tolist()
    return calls


def mendelian_errors(mother: list[str], child: list[str], man: list[str]) -> tuple[int, int]:
    """(errors, sites with all three called) for a candidate father ``man``."""
    errors = informative = 0
    for m, c, f in zip(mother, child, man, strict=True):
        if "." in m + c + f:
            continue
        informative += 1
        ma, fa, ca = m.split("/"), f.split("/"), sorted(c.split("/"))
        errors += not any(sorted((a, b)) == ca for a in ma for b in fa)
    return errors, informative


_MENDEL = (
    "awk -F'\\t' 'function has(g, a) { return substr(g, 1, 1) == a || substr(g, 3, 1) == a }\n"
    "{ m = $1; c = $2; if (m ~ /[.]/ || c ~ /[.]/) next\n"
    "  for (i = 3; i <= 5; i++) { f = $i; if (f ~ /[.]/) continue; n[i]++\n"
    "    a = substr(c, 1, 1); b = substr(c, 3, 1)\n"
    "    if (!((has(m, a) && has(f, b)) || (has(m, b) && has(f, a)))) e[i]++ } }\n"
    "END { for (i = 3; i <= 5; i++) printf \"%d\\t%d\\n\", e[i] + 0, n[i] + 0 }' gts.tsv "
    "| paste candidates.txt - > mendel.tsv\ncat mendel.tsv\n"
    "sort -t\"$(printf '\\t')\" -k2,2n mendel.tsv | head -1 | cut -f1")


def _solution(names: dict[str, str], n_sites: int, errors: dict[str, tuple[int, int]],
              hom_alt: list[int], mc_called: int, homs: int) -> tuple[str, ...]:
    """``hom_alt``: each candidate's 1/1 calls where mother and child are both called (a
    fact of the genotype table that no answer-keeping variant changes); ``mc_called``:
    the sites where mother and child are both called (what no control drops). The checks
    pin facts that different mutants move: the column map (a swap of names), each
    man's informative sites, the father's errors (a framed father), the runner-up's
    errors (a cleared rival)."""
    cands = [names["x"], names["y"], names["z"]]
    father = names["father"]
    e, n = errors[father]
    idx = cands.index(father) + 3
    v = {"M": names["mother"], "C": names["child"], "F": father, "S": n_sites, "E": e, "N": n,
         "I": idx, "ORDER": " ".join([names["mother"], names["child"], *cands]),
         "HX": hom_alt[0], "HY": hom_alt[1], "HZ": hom_alt[2], "MC": mc_called,
         "R2": sorted(errors[c][0] for c in cands)[1],
         "NX": errors[cands[0]][1], "NY": errors[cands[1]][1], "NZ": errors[cands[2]][1],
         "MEN": " ".join(cands), "HOMS": homs}
    return (
        turn("zcat calls.vcf.gz | grep '^#CHROM' | tr '\\t' '\\n' | awk 'NR > 9 { print NR "
             "\"\\t\" $0 }' > samples.tsv\ncat samples.tsv",
             node("load", fill("5 samples: mother @M@, child @C@ and three candidate fathers",
                               **v), "samples.tsv"), [
                 check("conservation", fill("mother and child are both called at @MC@ sites",
                                            **v), verdict(fill(
                     "test \"$(zcat calls.vcf.gz | grep -v '^#' | awk -F'\\t' -v m=\"$(awk "
                     "-F'\\t' '$2 == \"@M@\" { print $1 }' samples.tsv)\" -v c=\"$(awk -F'\\t' "
                     "'$2 == \"@C@\" { print $1 }' samples.tsv)\" '$m !~ /^[.]/ && $c !~ /^[.]/' "
                     "| wc -l)\" -eq @MC@ && test \"$(wc -l < samples.tsv)\" -eq 5", **v))),
                 check("type", "the column numbers name the samples", fill(
                     "zcat calls.vcf.gz | grep '^#CHROM' | tr '\\t' '\\n' | awk -F'\\t' "
                     "'NR == FNR { s[$1] = $2; next } (FNR in s) && s[FNR] == $1 { k++ } "
                     "END { print (k == 5 && NR - FNR == 5) ? \"True\" : \"False\" }' "
                     "samples.tsv -", **v)),
                 check("range", fill("where mother and child are called, the three men hold "
                                     "@HOMS@ homozygous calls", **v), verdict(fill(
                     "test \"$(zcat calls.vcf.gz | grep -v '^#' | awk -F'\\t' -v k=\"$(for s in "
                     "@M@ @C@ @MEN@; do awk -F'\\t' -v s=\"$s\" '$2 == s { print $1 }' "
                     "samples.tsv; done | tr '\\n' ' ')\" '{ n = split(k, c, \" \"); if "
                     "($(c[1]) ~ /^[.]/ || $(c[2]) ~ /^[.]/) next; for (i = 3; i <= n; i++) { "
                     "split($(c[i]), g, \":\"); h += g[1] == \"0/0\" || g[1] == \"1/1\" } } "
                     "END { print h + 0 }')\" -eq @HOMS@", **v)))]),
        turn(fill("cols=$(for s in @ORDER@; do awk -F'\\t' -v s=\"$s\" '$2 == s { print $1 }' "
                  "samples.tsv; done | tr '\\n' ' ')\necho \"$cols\"\n"
                  "printf '%s\\n' @ORDER@ | tail -3 > candidates.txt\n"
                  "zcat calls.vcf.gz | grep -v '^#' | awk -F'\\t' -v cols=\"$cols\" '{ n = "
                  "split(cols, k, \" \"); for (i = 1; i <= n; i++) { split($(k[i]), g, \":\"); "
                  "printf \"%s%s\", g[1], (i < n ? \"\\t\" : \"\\n\") } }' > gts.tsv\n"
                  "head -3 gts.tsv", **v),
             node("transform", fill("genotypes at @S@ sites, columns: mother, child, then the "
                                    "three candidates", **v), "gts.tsv", "n1"), [
                 check("conservation", fill("five diploid genotypes per row; @MC@ rows with "
                                            "mother and child called", **v), fill(
                     "awk -F'\\t' 'NF != 5 { bad = 1 } { for (i = 1; i <= NF; i++) if ($i !~ "
                     "/^[0-9.][\\/|][0-9.]$/) bad = 1 } $1 !~ /[.]/ && $2 !~ /[.]/ { n++ } "
                     "END { print (!bad && n == @MC@) ? \"True\" : \"False\" }' gts.tsv", **v)),
                 check("range", fill("the candidates are called at @NX@, @NY@ and @NZ@ of those "
                                     "sites", **v), fill(
                     "awk -F'\\t' '$1 !~ /[.]/ && $2 !~ /[.]/ { for (i = 3; i <= 5; i++) if "
                     "($i !~ /[.]/) k[i]++ } END { print (k[3] + 0 == @NX@ && k[4] + 0 == @NY@ "
                     "&& k[5] + 0 == @NZ@) ? \"True\" : \"False\" }' gts.tsv", **v)),
                 check("range", fill("where mother and child are called, the candidates hold "
                                     "@HX@, @HY@ and @HZ@ 1/1 calls", **v), fill(
                     "awk -F'\\t' '$1 !~ /[.]/ && $2 !~ /[.]/ { for (i = 3; i <= 5; i++) if "
                     "($i == \"1/1\") h[i]++ } END { print (h[3] + 0 == @HX@ && h[4] + 0 == @HY@ "
                     "&& h[5] + 0 == @HZ@) ? \"True\" : \"False\" }' gts.tsv", **v))]),
        turn(_MENDEL, node("test", fill("@F@ has @E@ Mendelian errors in @N@ informative sites, "
                                       "the fewest by far: the father", **v),
                          "mendel.tsv", "n2"), [
            check("range", "the father is the one candidate with the fewest errors", fill(
                "sort -t\"$(printf '\\t')\" -k2,2n mendel.tsv | awk -F'\\t' 'NR == 1 { ok = $1 == "
                "\"@F@\" && $2 == @E@ && $3 == @N@ } NR == 2 { ok = ok && $2 > 4 * (@E@ + 2) } "
                "END { print (ok && NR == 3) ? \"True\" : \"False\" }'", **v)),
            check("range", fill("the runner-up has @R2@ errors", **v), verdict(fill(
                "test \"$(cut -f2 mendel.tsv | sort -n | sed -n 2p)\" -eq @R2@", **v))),
            check("invariance", "a python recount of the father's errors agrees", fill(
                "python3 -c \"rows = [l.split() for l in open('gts.tsv')]; ok = lambda m, c, f: "
                "any(sorted([a, b]) == sorted(c.split('/')) for a in m.split('/') for b in "
                "f.split('/')); use = [r for r in rows if '.' not in r[0] + r[1] + r[@I@ - 1]]; "
                "e = sum(1 for r in use if not ok(r[0], r[1], r[@I@ - 1])); print(e == @E@ and "
                "len(use) == @N@ and '@F@\\t@E@\\t@N@' in open('mendel.tsv').read())\"", **v))]),
        final(father),
    )


_CARELESS = r"""cat > identity.py <<'EOF'
import gzip

rows = [line.rstrip('\n').split('\t') for line in gzip.open('calls.vcf.gz', 'rt')
        if not line.startswith('##')]
header, body = rows[0], rows[1:]
child = header.index('@C@')
best = max(('@X@', '@Y@', '@Z@'), key=lambda s: sum(
    r[child].split(':')[0] == r[header.index(s)].split(':')[0] for r in body))
print(best)
EOF
python3 identity.py > father.txt
cat father.txt"""


def _vcf(rng: np.random.Generator, roles: dict[str, str], who: list[str],
         gts: dict[str, list[str]], n_sites: int) -> str:
    """The VCF text, with the five samples in a random column order."""
    order = [who[i] for i in rng.permutation(len(who))]
    positions = np.cumsum(rng.integers(1, 6000, n_sites)) + 100_000
    refs = rng.integers(0, 4, n_sites)
    alts = (refs + rng.integers(1, 4, n_sites)) % 4
    header = _HEADER + "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO",
                                  "FORMAT", *(roles[w] for w in order)]) + "\n"
    depth = rng.integers(8, 60, (n_sites, len(order)))
    return header + "".join(
        f"chr7\t{positions[i]}\t.\t{'ACGT'[refs[i]]}\t{'ACGT'[alts[i]]}\t99\tPASS\t.\tGT:DP\t"
        + "\t".join(f"{gts[w][i]}:{depth[i, j]}" for j, w in enumerate(order)) + "\n"
        for i in range(n_sites))


def _hom_alt(gts: dict[str, list[str]], men: list[str]) -> list[int]:
    """Each man's 1/1 calls at the sites where mother and child are both called."""
    called = ["." not in m + c for m, c in zip(gts["mother"], gts["child"], strict=True)]
    return [sum(1 for ok, g in zip(called, gts[man], strict=True) if ok and g == "1/1")
            for man in men]


def _homs(gts: dict[str, list[str]], men: list[str]) -> int:
    """The men's 0/0 and 1/1 calls at the sites where mother and child are both called."""
    called = ["." not in m + c for m, c in zip(gts["mother"], gts["child"], strict=True)]
    return sum(ok and gts[man][i] in ("0/0", "1/1") for man in men
               for i, ok in enumerate(called))


def _both_called(gts: dict[str, list[str]]) -> int:
    """Sites where mother and child are both called."""
    return sum("." not in m + c for m, c in zip(gts["mother"], gts["child"], strict=True))


def _identity(child: list[str], man: list[str]) -> int:
    return sum(1 for c, m in zip(child, man, strict=True) if c == m)


# ----- the reference -----

def _consistent(m: list[str], c: list[str], f: list[str]) -> bool:
    return len(c) == 2 and ((c[0] in m and c[1] in f) or (c[1] in m and c[0] in f))


def _errors(rows: list[list[str]], cols: tuple[int, int, int]) -> int:
    """Mendelian errors of the man in column ``cols[2]`` at the sites where mother
    (``cols[0]``), child and he are all called."""
    errors = 0
    for row in rows:
        m, c, f = (genotype_alleles(row[i]) for i in cols)
        if "." not in m + c + f:
            errors += not _consistent(m, c, f)
    return errors


def _solve(contents: Contents, *, mother: str, child: str, men: tuple[str, ...]) -> str:
    header, rows = vcf_table(content_of(contents, "calls.vcf.gz"))
    if not {mother, child, *men} <= set(header[9:]):
        return CANNOT_DETERMINE
    errors = {man: _errors(rows, (header.index(mother), header.index(child), header.index(man)))
              for man in men}
    fewest = min(errors.values())
    best = [man for man in men if errors[man] == fewest]
    return best[0] if len(best) == 1 else CANNOT_DETERMINE


def _parent_uncalled(record: bytes, *, mother: int, child: int) -> bool:
    """The mother's or the child's call is missing: no man's error count reads this site."""
    fields = record.decode("utf-8", "replace").split("\t")
    return len(fields) > max(mother, child) and not record.startswith(b"#") and any(
        "." in genotype_alleles(fields[i]) for i in (mother, child))


def _swap_names(content: bytes, rng: random.Random, *, father: str, others: tuple[str, ...]
                ) -> bytes | None:
    """The father's name and another man's swapped in the ``#CHROM`` line."""
    lines = lines_of(content)
    at = next((i for i, line in enumerate(lines) if line.startswith(b"#CHROM")), None)
    if at is None:
        return None
    other = rng.choice(others)
    names = {father: other, other: father}
    fields = lines[at].rstrip(b"\n").decode().split("\t")
    return edit_lines(content, {at: ("\t".join(names.get(f, f) for f in fields) + "\n").encode()})


def _frame_father(content: bytes, rng: random.Random, *, mother: str, child: str,
                  father: str, others: tuple[str, ...]) -> bytes | None:
    """The father's call changed to an inconsistent one at just enough consistent sites
    that another man has fewer errors."""
    header, rows = vcf_table(content)
    cols = tuple(header.index(name) for name in (mother, child, father))
    need = min(_errors(rows, (cols[0], cols[1], header.index(o))) for o in others) + 1 \
        - _errors(rows, (cols[0], cols[1], cols[2]))
    if need <= 0:
        return None  # he is not the one with the fewest errors already
    lines = lines_of(content)
    body = [i for i, line in enumerate(lines) if line.strip() and not line.startswith(b"#")]
    flips = {}
    for i in rng.sample(body, len(body)):
        fields = lines[i].decode().split("\t")
        m, c, f = (genotype_alleles(fields[j]) for j in cols)
        if "." in m + c + f or not _consistent(m, c, f):
            continue
        bad = next((g for g in ("0/0", "1/1") if not _consistent(m, c, g.split("/"))), None)
        if bad is not None:
            fields[cols[2]] = bad + fields[cols[2]][3:]
            flips[i] = "\t".join(fields).encode()
        if len(flips) >= need:
            return edit_lines(content, flips)
    return None


def _clear_rival(content: bytes, rng: random.Random, *, mother: str, child: str,
                 father: str, others: tuple[str, ...]) -> bytes | None:
    """The other man with the fewest errors made consistent at just enough of his error
    sites to tie with the father (a tie cannot be decided: the answer moves): the
    father's own count kept, the runner-up's moved."""
    header, rows = vcf_table(content)
    mc = (header.index(mother), header.index(child))
    mine = _errors(rows, (*mc, header.index(father)))
    rival = min(others, key=lambda o: _errors(rows, (*mc, header.index(o))))
    col = header.index(rival)
    need = _errors(rows, (*mc, col)) - mine
    lines = lines_of(content)
    body = [i for i, line in enumerate(lines) if line.strip() and not line.startswith(b"#")]
    fixes: dict[int, bytes] = {}
    for i in rng.sample(body, len(body)):
        if len(fixes) >= need:
            break
        fields = lines[i].decode().split("\t")
        m, c, f = (genotype_alleles(fields[j]) for j in (*mc, col))
        if "." in m + c + f or _consistent(m, c, f):
            continue
        good = next((g for g in ("0/0", "0/1", "1/1") if _consistent(m, c, g.split("/"))), None)
        if good is None:  # the child's call cannot come from this mother: no man fixes it
            continue
        fields[col] = good + fields[col][3:]
        fixes[i] = "\t".join(fields).encode()
    return edit_lines(content, fixes) if fixes and len(fixes) >= need else None


def _hide_mother(content: bytes, rng: random.Random, *, mother: str, child: str,
                 father: str, others: tuple[str, ...]) -> bytes | None:
    """The mother's call made missing at enough of the sites where the rival with the
    fewest errors errs and the father does not, that the rival ties with the father:
    fewer sites with mother and child called, the father's errors kept."""
    header, rows = vcf_table(content)
    mc = (header.index(mother), header.index(child))
    cols = {name: header.index(name) for name in (father, *others)}
    mine = _errors(rows, (*mc, cols[father]))
    rival = min(others, key=lambda o: _errors(rows, (*mc, cols[o])))
    need = _errors(rows, (*mc, cols[rival])) - mine
    lines = lines_of(content)
    body = [i for i, line in enumerate(lines) if line.strip() and not line.startswith(b"#")]
    hidden: dict[int, bytes] = {}
    for i in rng.sample(body, len(body)):
        if len(hidden) >= need:
            break
        fields = lines[i].decode().split("\t")
        m, c, f, r = (genotype_alleles(fields[j]) for j in (*mc, cols[father], cols[rival]))
        if "." in m + c + r or _consistent(m, c, r) or ("." not in f and not _consistent(m, c, f)):
            continue
        fields[mc[0]] = "./." + fields[mc[0]][3:]
        hidden[i] = "\t".join(fields).encode()
    return edit_lines(content, hidden) if hidden and len(hidden) >= need else None


def _reference(roles: dict[str, str], men: list[str], text: str) -> Reference:
    header = next(line for line in text.splitlines() if line.startswith("#CHROM")).split("\t")
    mother, child, father = roles["mother"], roles["child"], roles["father"]
    others = tuple(roles[m] for m in men if m != "father")
    return Reference(
        solve=partial(_solve, mother=mother, child=child, men=tuple(roles[m] for m in men)),
        preserving={"calls.vcf.gz": ("recompress", "shuffle_records", "add_comment",
                                     "drop_irrelevant")},
        # Not respell_fields: a man's calls redrawn keep the father, but move the
        # runner-up's Mendelian errors, which an honest analysis checks on its way.
        rewriting={"calls.vcf.gz": tuple(t for t in DEFAULT_REWRITES
                                         if t != "respell_fields")},
        irrelevant={"calls.vcf.gz": partial(_parent_uncalled, mother=header.index(mother),
                                            child=header.index(child))},
        mutators={"calls.vcf.gz": aimed(
            partial(_swap_names, father=father, others=others),
            partial(_frame_father, mother=mother, child=child, father=father, others=others),
            *(partial(edit, mother=mother, child=child, father=father, others=others)
              for edit in (_clear_rival, _hide_mother)))})


def trio_parentage(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """The father among three men (trap: genotype identity picks the child's brother; at
    warmup there is no brother, and identity picks the father)."""
    n_sites = _SIZES[difficulty]
    pool = [_NAMES[i] for i in rng.permutation(len(_NAMES))[:5]]
    roles = {"mother": pool[0], "child": pool[1]}
    men = ["father", "brother", "unrelated"]
    men = [men[i] for i in rng.permutation(3)]
    roles |= {who: pool[2 + i] for i, who in enumerate(men)}
    for _ in range(20):
        gts = {who: _gt_strings(rng, a) for who, a in _genotypes(
            rng, n_sites, difficulty != "warmup").items()}
        errors = {who: mendelian_errors(gts["mother"], gts["child"], gts[who]) for who in men}
        identity = {who: _identity(gts["child"], gts[who]) for who in men}
        margin = min(errors[w][0] for w in men if w != "father") > 4 * (errors["father"][0] + 2)
        picked = "brother" if difficulty != "warmup" else "father"
        if margin and max(men, key=identity.__getitem__) == picked and (
                identity[picked] > max(identity[w] for w in men if w != picked)):
            break
    else:
        raise RuntimeError("trio_parentage: the trap is wrong; generator bug")
    text = _vcf(rng, roles, ["mother", "child", *men], gts, n_sites)
    names = {"mother": roles["mother"], "child": roles["child"], "father": roles["father"],
             "x": roles[men[0]], "y": roles[men[1]], "z": roles[men[2]]}
    by_name = {roles[w]: errors[w] for w in men}
    careless = fill(_CARELESS, C=roles["child"], X=names["x"], Y=names["y"], Z=names["z"])
    trap = Trap(
        description=("genotype identity measures relatedness, not parentage: the child's "
                     "brother shares more identical genotypes than the father"),
        careless_solution=(
            turn(careless, node("test", f"{roles[picked]} is most similar to the child: "
                                        "the father", "father.txt"), [
                check("type", "the answer is a sample of the VCF", verdict(
                    "test \"$(zcat calls.vcf.gz | grep '^#CHROM' | tr '\\t' '\\n' | "
                    "grep -cxF -f father.txt)\" -eq 1"))]),
            final(roles[picked])),
        wrong_answer=roles[picked])
    question = (f"calls.vcf.gz holds a mother ({roles['mother']}), her child "
                f"({roles['child']}) and three men ({names['x']}, {names['y']}, {names['z']}), "
                "one of whom is the child's biological father. Which one? Genotypes have a "
                "small error rate and some are missing. Answer with the sample name.")
    return Instance(files={"calls.vcf.gz": gz(text)}, question=question,
                    answer=roles["father"],
                    grader={"kind": "choice", "choices": [names["x"], names["y"], names["z"]]},
                    solution=_solution(names, n_sites, by_name, _hom_alt(gts, men),
                                       _both_called(gts), _homs(gts, men)),
                    trap=trap,
                    tags=("vcf", "pedigree", "mendelian-errors", "relatedness"),
                    reference=_reference(roles, men, text))
