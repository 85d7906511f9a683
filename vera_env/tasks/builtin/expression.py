"""Tabular family: a fold change from values stored as log2(TPM + 1).

Why this trap. Expression tables are shared already transformed -- log2(TPM + 1) is the
usual -- and the transform lives in a README, not in the numbers. A fold change computed
on the stored values as ``mean(treated) / mean(control)`` is a ratio of logarithms: a
gene whose expression quadruples comes out at about 1.3, a number that reads like a
modest, believable effect. The question asks for the ratio of mean TPM, so the values
must be taken back to the TPM scale (``2^x - 1``) first.

The ground truth is computed from the values as written (three decimals), back-
transformed in double precision exactly as the solution's awk does; tests recompute it
from the file with Python's ``csv`` and ``math`` modules.

Each instance's `Reference` recomputes the fold change from the decoded tables by gene
and sample name (rows of both in any order; "cannot be determined" if the gene is not
there once). Other genes' rows are never read, so they may be dropped. The aimed
mutants move one treated or one control value of the gene (a check of either mean dies
on one of them), or flip one sample's condition in samples.tsv.
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
    node,
    turn,
    verdict,
)
from vera_env.tasks.builtin.solvers import (
    aimed,
    edit_lines,
    lines_of,
    moved,
    read_table,
    rejoin,
    text_of,
    tsv_fields,
)
from vera_env.tasks.model import Trap
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["fold_change"]

_GENES = ("IL6", "CXCL8", "TNF", "IFIT1", "ISG15", "MX1", "CCL2", "NFKBIA", "SOCS3", "IRF7",
          "EGR1", "FOS", "JUN", "HSPA1A", "DDIT3", "ATF3", "GADD45A", "CDKN1A", "MDM2", "BAX")
_SIZES = {"warmup": (30, 3), "easy": (200, 3), "medium": (2000, 6), "hard": (20_000, 12),
          "xl": (60_000, 48)}
_README = """expression.tsv: one row per gene, one column per sample (names as in samples.tsv).
Values are log2(TPM + 1), rounded to three decimals. TPM = 2^value - 1.
samples.tsv: sample name and condition (control or treated).
"""


def _values(rng: np.random.Generator, n_genes: int, n_samples: int, target: int,
            treated: np.ndarray) -> np.ndarray:
    """log2(TPM + 1) in thousandths (integers, so the file is the truth's input)."""
    base = rng.lognormal(np.log(20), 1.5, n_genes)
    tpm = base[:, None] * rng.lognormal(0, 0.25, (n_genes, n_samples))
    effect = float(rng.choice([-1, 1])) * rng.uniform(1.0, 3.0)  # log2 fold change
    tpm[target] = rng.uniform(30, 200) * rng.lognormal(0, 0.2, n_samples) * np.where(
        treated, 2.0 ** effect, 1.0)
    milli: np.ndarray = np.rint(np.log2(tpm + 1) * 1000).astype(np.int64)
    return milli


def _mean(values: list[float], idx: list[int]) -> float:
    return sum(values[i] for i in idx) / len(idx)


def _stats(milli: np.ndarray, treated: np.ndarray) -> tuple[float, float]:
    """(fold change of mean TPM, careless ratio of mean log values), as awk computes them."""
    logs = [int(x) / 1000 for x in milli]
    tpm = [2.0 ** x - 1 for x in logs]
    t = [i for i, flag in enumerate(treated.tolist()) if flag]
    c = [i for i, flag in enumerate(treated.tolist()) if not flag]
    return _mean(tpm, t) / _mean(tpm, c), _mean(logs, t) / _mean(logs, c)


_LOG_SUM = ("awk -F'\\t' 'NR == FNR { cond[$1] = $3; next } $1 == \"@G@\" { for (i = 2; "
            "i <= NF; i++) if (cond[i] == \"@K@\") s += $i } END { printf \"%d\", s * 1000 "
            "+ 0.5 }' columns.tsv expression.tsv")
_TPM_MEAN = ("python3 -c \"import csv; cond = {int(l.split()[0]) - 1: l.split()[2] for l in "
             "open('columns.tsv')}; g = [r for r in csv.reader(open('expression.tsv'), "
             "delimiter='\\t') if r[0] == '@G@']; v = [2 ** float(x) - 1 for i, x in "
             "enumerate(g[0]) if cond.get(i) == '@K@']; print(len(g) == 1 and "
             "abs(sum(v) / len(v) - @M@) < 1e-6 * max(1, @M@))\"")


def _solution(gene: str, n_samples: int, n_treated: int, answer: str, n_genes: int,
              milli: np.ndarray, treated: np.ndarray) -> tuple[str, ...]:
    """Three nodes whose checks track different facts: the groups (samples.tsv) and the
    gene's log values summed per group (expression.tsv: a treated and a control mutant
    move one each); the TPM values, with the treated mean apart; the fold change, with
    each group's mean TPM read again from expression.tsv."""
    tpm = 2.0 ** (milli / 1000) - 1
    v = {"G": gene, "N": n_samples, "T": n_treated, "C": n_samples - n_treated, "ANS": answer,
         "ROWS": n_genes + 1, "TL": int(milli[treated].sum()), "CL": int(milli[~treated].sum()),
         "TM": repr(float(tpm[treated].mean())), "CM": repr(float(tpm[~treated].mean()))}
    return (
        turn("cat README.txt\ncat samples.tsv\nhead -1 expression.tsv | tr '\\t' '\\n' | "
             "awk 'NR == FNR { c[$1] = $2; next } FNR > 1 { print FNR \"\\t\" $1 \"\\t\" c[$1] }' "
             "samples.tsv - > columns.tsv\ncut -f3 columns.tsv | sort | uniq -c",
             node("load", fill("@N@ sample columns: @T@ treated, @C@ control; values are "
                               "log2(TPM + 1)", **v), "columns.tsv"), [
                 check("conservation", "every sample column has a condition", verdict(fill(
                     "test \"$(awk -F'\\t' '$3 == \"treated\"' columns.tsv | wc -l)\" -eq @T@ && "
                     "test \"$(awk -F'\\t' '$3 == \"control\"' columns.tsv | wc -l)\" -eq @C@",
                     **v))),
                 check("range", fill("@G@'s treated log values sum to @TL@ thousandths", **v),
                       verdict(fill(f'test "$({_LOG_SUM})" -eq @TL@', K="treated", **v))),
                 check("range", fill("@G@'s control log values sum to @CL@ thousandths", **v),
                       verdict(fill(f'test "$({_LOG_SUM})" -eq @CL@', K="control", **v)))]),
        turn(fill("awk -F'\\t' 'NR == FNR { cond[$1] = $3; next } $1 == \"@G@\" { for (i = 2; "
                  "i <= NF; i++) printf \"%s\\t%.6f\\t%s\\n\", cond[i], 2 ^ $i - 1, $i }' "
                  "columns.tsv expression.tsv > gene_tpm.tsv\ncat gene_tpm.tsv", **v),
             node("transform", fill("@G@: @N@ values back-transformed to TPM = 2^x - 1", **v),
                  "gene_tpm.tsv", "n1"), [
                 check("conservation", "one value per sample", fill(
                     "awk -F'\\t' '$1 == \"treated\" { t++ } $1 == \"control\" { c++ } END { print "
                     "(t == @T@ && c == @C@ && NR == @N@) ? \"True\" : \"False\" }' gene_tpm.tsv",
                     **v)),
                 check("invariance", "python's 2 ** x - 1 gives the same TPM", fill(
                     "python3 -c \"rows = [l.split() for l in open('gene_tpm.tsv')]; "
                     "g = [l.split() for l in open('expression.tsv') if l.split()[0] == '@G@']"
                     "[0]; print(len(rows) == @N@ and all(abs(2 ** float(x) - 1 - float(r[1])) "
                     "< 1e-5 and float(r[1]) >= 0 for r, x in zip(rows, g[1:])))\"", **v)),
                 check("range", fill("the treated mean TPM is @TM@", **v), fill(
                     "awk -F'\\t' '$1 == \"treated\" { s += $2; n++ } END { m = s / n; print "
                     "(m - @TM@ < 1e-4 * (1 + @TM@) && @TM@ - m < 1e-4 * (1 + @TM@)) ? "
                     "\"True\" : \"False\" }' gene_tpm.tsv", **v))]),
        turn("awk -F'\\t' '{ s[$1] += $2; n[$1]++ } END { printf \"%.3f\\n\", (s[\"treated\"] / "
             "n[\"treated\"]) / (s[\"control\"] / n[\"control\"]) }' gene_tpm.tsv "
             "> fold_change.txt\ncat fold_change.txt",
             node("test", fill("@G@: mean TPM treated / control = @ANS@", **v),
                  "fold_change.txt", "n2"), [
                 check("invariance", "recomputed straight from expression.tsv", fill(
                     "python3 -c \"import csv; cond = dict(l.split() for l in open('samples.tsv') "
                     "if not l.startswith('sample')); rows = list(csv.reader(open("
                     "'expression.tsv'), delimiter='\\t')); g = [r for r in rows if r[0] == "
                     "'@G@']; m = lambda k: [2 ** float(x) - 1 for s, x in zip(rows[0][1:], "
                     "g[0][1:]) if cond.get(s) == k]; f = float(open('fold_change.txt').read()); "
                     "print(len(rows) == @ROWS@ and rows[0][0] == 'gene' and len(g) == 1 and "
                     "abs(sum(m('treated')) / len(m('treated')) / (sum(m('control')) / "
                     "len(m('control'))) - f) < 0.0006 and f == @ANS@)\"", **v)),
                 check("invariance", fill("expression.tsv read again: control mean TPM @CM@",
                                          **v), fill(_TPM_MEAN, K="control", M=v["CM"], **v)),
                 check("invariance", fill("expression.tsv read again: treated mean TPM @TM@",
                                          **v), fill(_TPM_MEAN, K="treated", M=v["TM"], **v))]),
        final(answer),
    )


# ----- the reference -----

_TOL = 0.001


def _fold(header: list[str], values: list[str], condition: dict[str, str]) -> str:
    """Mean TPM of the treated columns over that of the control ones, summed in column
    order as the generator sums (so the same doubles round the same way)."""
    tpm: dict[str, list[float]] = {"treated": [], "control": []}
    for sample, value in zip(header[1:], values[1:], strict=True):
        if condition.get(sample) not in tpm:
            raise ValueError(f"samples.tsv gives sample {sample!r} no condition")
        tpm[condition[sample]].append(2.0 ** float(value) - 1)
    treated, control = tpm["treated"], tpm["control"]
    if not treated or not control or not sum(control):
        return CANNOT_DETERMINE
    return f"{sum(treated) / len(treated) / (sum(control) / len(control)):.3f}"


def _conditions(contents: Contents) -> dict[str, str]:
    header, rows = read_table(text_of(contents, "samples.tsv"), "\t", ("sample", "condition"))
    s, c = header.index("sample"), header.index("condition")
    return {row[s]: row[c] for row in rows}


def _solve(contents: Contents, *, gene: str) -> str:
    header, rows = read_table(text_of(contents, "expression.tsv"), "\t", ("gene",))
    if header[0] != "gene":
        raise ValueError("expression.tsv: the first column is not the gene")
    hits = [row for row in rows if row[0] == gene]
    return _fold(header, hits[0], _conditions(contents)) if len(hits) == 1 else CANNOT_DETERMINE


def _other_gene(record: bytes, *, gene: str) -> bool:
    """Another gene's row: the fold change never reads it."""
    return tsv_fields(record)[0].decode("utf-8", "replace") != gene


def _shift_value(content: bytes, rng: random.Random, *, gene: str, condition: dict[str, str],
                 group: str) -> bytes | None:
    """One of the gene's values in a ``group`` sample raised by 1 (its TPM doubled)."""
    lines = lines_of(content)
    header = tsv_fields(lines[0])
    at = next((i for i, line in enumerate(lines[1:], 1) if tsv_fields(line)[0] == gene.encode()), None)
    if at is None:
        return None
    fields = tsv_fields(lines[at])
    cols = [j for j, name in enumerate(header) if condition.get(name.decode()) == group]
    j = rng.choice(cols)
    base = _fold([h.decode() for h in header], [f.decode() for f in fields], condition)
    fields[j] = f"{float(fields[j]) + 1:.3f}".encode()
    if not moved(base, _fold([h.decode() for h in header], [f.decode() for f in fields],
                             condition), _TOL):
        return None
    return edit_lines(content, {at: rejoin(fields, lines[at])})


def _flip_condition(content: bytes, rng: random.Random) -> bytes | None:
    """One control sample relabelled treated in samples.tsv (one way only, so the edit
    made again moves the same counts further, never back)."""
    lines = lines_of(content)
    controls = [i for i, line in enumerate(lines[1:], 1) if tsv_fields(line)[-1:] == [b"control"]]
    if len(controls) < 2:
        return None
    i = rng.choice(controls)
    fields = tsv_fields(lines[i])
    return edit_lines(content, {i: rejoin([*fields[:-1], b"treated"], lines[i])})


def _extra_samples(content: bytes, rng: random.Random) -> bytes | None:
    """Rows for samples expression.tsv has no column of, appended to samples.tsv (a
    control): conditions are looked up by the expression header's names, so these are
    never read -- but the table's lines, digits and sorted content all change, at both
    ends of the sorted rows (an upper-case name sorts before the ``S01`` rows, a
    lower-case one after them: measured, with lower-case names only, the first 64 bytes
    of the sorted table earned as a fact)."""
    end = b"" if content.endswith(b"\n") or not content else b"\n"
    names = [b"P%02dX" % rng.randint(1, 99)] + [b"pilot_%d" % rng.randint(1, 99)
                                                 for _ in range(rng.randint(1, 2))]
    extra = [b"%s\t%s\n" % (name, rng.choice((b"control", b"treated"))) for name in names]
    return content + end + b"".join(extra)


def _reworded_readme(content: bytes, rng: random.Random) -> bytes | None:
    """A note added to README.txt (a control): nothing the answer needs is reworded."""
    notes = (b"Samples were sequenced in one batch.\n", b"Genes are in no particular order.\n",
             b"Contact the core facility with questions.\n")
    end = b"" if content.endswith(b"\n") or not content else b"\n"
    return content + end + rng.choice(notes)


def _reference(gene: str, samples: list[str], treated: np.ndarray) -> Reference:
    condition = {s: "treated" if t else "control" for s, t in zip(samples, treated.tolist(),
                                                                   strict=True)}
    return Reference(
        solve=partial(_solve, gene=gene),
        preserving={"expression.tsv": ("shuffle_records", "drop_irrelevant"),
                    "samples.tsv": ("shuffle_records",), "README.txt": ()},
        irrelevant={"expression.tsv": partial(_other_gene, gene=gene)},
        mutators={"expression.tsv": aimed(*(partial(_shift_value, gene=gene, condition=condition,
                                                    group=g) for g in ("treated", "control"))),
                  "samples.tsv": aimed(_flip_condition)},
        controls={"samples.tsv": aimed(_extra_samples), "README.txt": aimed(_reworded_readme)})


def fold_change(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Mean-TPM fold change from log2(TPM + 1) values (trap: ratio of the logs)."""
    n_genes, per_group = _SIZES[difficulty]
    gene = _GENES[int(rng.integers(len(_GENES)))]
    names = [g for g in _GENES if g != gene] + [f"GENE{i:05d}" for i in range(n_genes)]
    names = [gene] + names[:n_genes - 1]
    treated = np.array([False] * per_group + [True] * per_group)[rng.permutation(2 * per_group)]
    for _ in range(20):
        milli = _values(rng, n_genes, 2 * per_group, 0, treated)
        fc, careless = _stats(milli[0], treated)
        if abs(fc * 1000 % 1 - 0.5) > 0.01 and abs(fc - careless) > 0.01:  # no rounding ties
            break
    else:
        raise RuntimeError("fold_change: the trap does not bite; generator bug")
    order = rng.permutation(n_genes)
    samples = [f"S{i + 1:02d}" for i in range(2 * per_group)]
    lines = ["gene\t" + "\t".join(samples)]
    for row in order.tolist():
        lines.append(names[row] + "\t" + "\t".join(
            f"{x // 1000}.{x % 1000:03d}" for x in milli[row].tolist()))
    answer, wrong = f"{fc:.3f}", f"{careless:.3f}"
    table = "sample\tcondition\n" + "".join(
        f"{s}\t{'treated' if t else 'control'}\n" for s, t in zip(samples, treated, strict=True))
    careless_cmd = fill(
        "awk -F'\\t' 'NR == FNR { c[$1] = $2; next } FNR == 1 { for (i = 2; i <= NF; i++) "
        "k[i] = c[$i]; next } $1 == \"@G@\" { for (i = 2; i <= NF; i++) { s[k[i]] += $i; "
        "n[k[i]]++ } } END { printf \"%.3f\\n\", (s[\"treated\"] / n[\"treated\"]) / "
        "(s[\"control\"] / n[\"control\"]) }' samples.tsv expression.tsv > fc.txt\ncat fc.txt",
        G=gene)
    trap = Trap(
        description="the values are log2(TPM + 1); a ratio of their means is not a fold "
                    "change of TPM",
        careless_solution=(
            turn(careless_cmd, node("test", f"{gene} fold change {wrong}", "fc.txt"), [
                check("range", "the fold change is positive",
                      "awk '{ print ($1 > 0) ? \"True\" : \"False\" }' fc.txt")]),
            final(wrong)),
        wrong_answer=wrong)
    question = (f"expression.tsv holds log2(TPM + 1) values (see README.txt) and samples.tsv "
                f"each sample's condition. What is the fold change of {gene} between treated "
                "and control samples, defined as its mean TPM over the treated samples divided "
                "by its mean TPM over the control samples (on the TPM scale, not the log "
                "scale)? Give three decimals.")
    return Instance(
        files={"expression.tsv": ("\n".join(lines) + "\n").encode(),
               "samples.tsv": table.encode(), "README.txt": _README.encode()},
        question=question, answer=answer, grader={"kind": "numeric", "abs_tol": _TOL},
        solution=_solution(gene, 2 * per_group, per_group, answer, n_genes, milli[0],
                           treated), trap=trap,
        tags=("tsv", "log-scale", "fold-change"), reference=_reference(gene, samples, treated))
