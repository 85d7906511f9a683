"""Tabular family: which class is 1? A mean over the malignant tumours.

Why this trap. A binary label column invites the reading "1 = the condition, 0 = the
rest". Real datasets disagree: scikit-learn's breast cancer data, one of the most used
teaching sets, codes ``0 = malignant, 1 = benign``. Averaging a feature over
``target == 1`` then reports the benign tumours' mean -- a real number in the right
units and a plausible size, just the other class's. The codebook says how the label is
coded, for whoever reads it.

The ground truth is the mean over the rows the generator draws as malignant, summed in
integer hundredths so it is exact; tests recompute it from the CSV with the ``csv``
module.

Each instance's `Reference` recomputes the mean exactly (fractions) from the decoded CSV
by column name (rows in any order), with the malignant code read from the codebook.
Rows of the other class are never averaged, so they may be dropped. The aimed mutants
move one malignant value, relabel the benign row farthest from the malignant mean,
rename the feature's column ("cannot be determined"), or swap the codes in the codebook
(the trap made true: a check that hard-codes 0 dies).
"""

from __future__ import annotations

import math
import random
import re
from fractions import Fraction
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
    column,
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

__all__ = ["MALIGNANT", "label_coding"]

MALIGNANT = 0
"""The label of the malignant class, as scikit-learn's ``load_breast_cancer`` codes it."""

# feature -> ((malignant mean, sd), (benign mean, sd)), loosely after the Wisconsin data
_FEATURES = {
    "radius_mean": ((17.46, 3.2), (12.15, 1.78)),
    "texture_mean": ((21.60, 3.8), (17.91, 4.0)),
    "perimeter_mean": ((115.37, 21.9), (78.08, 11.8)),
    "area_mean": ((978.38, 368.0), (462.79, 134.0)),
}
_ROWS = {"warmup": 30, "easy": 200, "medium": 2000, "hard": 20_000, "xl": 400_000}
_CODEBOOK = """tumours.csv: one row per fine-needle aspirate, comma-separated, header first.

id               integer, unique
radius_mean      mean distance from centre to perimeter (um)
texture_mean     standard deviation of grey-scale values
perimeter_mean   mean perimeter (um)
area_mean        mean area (um^2)
target           diagnosis, coded as in sklearn.datasets.load_breast_cancer:
                 0 = malignant, 1 = benign
"""


def _table(rng: np.random.Generator, n_rows: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Labels and each feature in integer hundredths (non-negative)."""
    target = (rng.random(n_rows) >= 0.37).astype(np.int64)  # about 37% malignant
    target[:2] = MALIGNANT
    target[2:4] = 1 - MALIGNANT
    cents = {}
    for name, (bad, good) in _FEATURES.items():
        mean = np.where(target == MALIGNANT, bad[0], good[0])
        sd = np.where(target == MALIGNANT, bad[1], good[1])
        cents[name] = np.maximum(np.rint(rng.normal(mean, sd) * 100), 100).astype(np.int64)
    return target, cents


def _near_tie(cents: int, n: int) -> bool:
    """Whether ``cents / n / 100`` lies within float noise of a two-decimal rounding tie."""
    fraction = (2 * cents) % (2 * n)  # twice the remainder: n means exactly .xx5
    return abs(fraction - n) * 10**6 < n


def _codebook(code: int) -> str:
    """The codebook with malignant coded ``code``: sklearn's 0, or 1 at warmup (no trap:
    ``target == 1`` is then malignant)."""
    return _CODEBOOK if code == MALIGNANT else _CODEBOOK.replace(
        "coded as in sklearn.datasets.load_breast_cancer:\n                 0 = malignant, 1 = benign",
        "coded:\n                 1 = malignant, 0 = benign")


def _csv(target: np.ndarray, cents: dict[str, np.ndarray], code: int = MALIGNANT) -> str:
    """The table, labels written with malignant as ``code``."""
    target = target if code == MALIGNANT else 1 - target
    names = list(_FEATURES)
    rows = ["id," + ",".join(names) + ",target"]
    for i in range(len(target)):
        values = ",".join(f"{cents[n][i] // 100}.{cents[n][i] % 100:02d}" for n in names)
        rows.append(f"{i + 1},{values},{target[i]}")
    return "\n".join(rows) + "\n"


def _solution(feature: str, col: int, n_rows: int, n_bad: int, answer: str, cents: int,
              code: int = MALIGNANT) -> tuple[str, ...]:
    """Three nodes whose checks track different facts: the column (the header), the
    label code (codebook.txt) and the malignant count; that count, its sum in hundredths
    and the code read again; the mean, recomputed, against the benign mean, and the code."""
    v = {"F": feature, "COL": col, "ROWS": n_rows, "NB": n_bad, "ANS": answer,
         "SUM": cents, "CODE": "grep -o '[01] = malignant' codebook.txt | cut -c1",
         "M": code, "B": 1 - code}
    return (
        turn(fill("cat codebook.txt\nhead -3 tumours.csv\n"
                  "head -1 tumours.csv | tr ',' '\\n' | grep -nx '@F@' | cut -d: -f1 > col.txt\n"
                  "grep -o '[01] = malignant' codebook.txt | cut -c1 > malignant_code.txt\n"
                  "cat col.txt malignant_code.txt", **v),
             node("load", fill("@F@ is column @COL@; the codebook codes malignant as @M@, "
                               "benign as @B@", **v), "malignant_code.txt"), [
                 check("type", fill("col.txt points at @F@", **v), verdict(fill(
                     "test \"$(head -1 tumours.csv | cut -d, -f\"$(cat col.txt)\")\" = @F@",
                     **v))),
                 check("type", "the malignant code is the codebook's", verdict(fill(
                     "test \"$(cat malignant_code.txt)\" = @M@ && grep -q \"^ *$(cat "
                     "malignant_code.txt) = malignant\" codebook.txt", **v))),
                 check("range", fill("@NB@ rows carry the malignant code", **v), verdict(fill(
                     "test \"$(awk -F, -v m=\"$(cat malignant_code.txt)\" 'NR > 1 && $NF == m' "
                     "tumours.csv | wc -l)\" -eq @NB@", **v)))]),
        turn(fill("awk -F, -v c=\"$(cat col.txt)\" -v m=\"$(cat malignant_code.txt)\" "
                  "'NR > 1 && $NF == m { print $c }' tumours.csv > malignant_values.txt\n"
                  "wc -l < malignant_values.txt", **v),
             node("qc", fill("@NB@ malignant tumours (target == @M@) of @ROWS@", **v),
                  "malignant_values.txt", "n1"), [
                 check("conservation", fill("as many values as rows with target @M@", **v),
                       verdict(fill(
                           "test \"$(wc -l < malignant_values.txt)\" -eq \"$(awk -F, 'NR > 1 && "
                           "$NF == @M@' tumours.csv | wc -l)\" && test \"$(wc -l < "
                           "malignant_values.txt)\" -eq @NB@", **v))),
                 check("range", fill("the malignant values sum to @SUM@ hundredths", **v),
                       verdict(fill("test \"$(tr -d . < malignant_values.txt | awk '{ s += $1 } "
                                    "END { printf \"%d\", s }')\" -eq @SUM@", **v))),
                 check("invariance", "the codebook still codes malignant as the kept code",
                       verdict(fill("test \"$(@CODE@)\" = @M@ && test \"$(wc -l < "
                                    "malignant_values.txt)\" -eq @NB@", **v)))]),
        turn("awk '{ s += $1; n++ } END { printf \"%.2f\\n\", s / n }' malignant_values.txt "
             "> mean.txt\ncat mean.txt",
             node("test", fill("mean @F@ of malignant tumours: @ANS@", **v), "mean.txt", "n2"), [
                 check("invariance", "a python recomputation agrees", fill(
                     "python3 -c \"v = [float(x) for x in open('malignant_values.txt')]; m = "
                     "float(open('mean.txt').read()); print(abs(sum(v) / len(v) - m) < 0.006 "
                     "and m == @ANS@ and len(v) == @NB@)\"", **v)),
                 check("range", "the malignant mean exceeds the benign mean", fill(
                     "awk -F, 'NR == FNR { m = $1; k++; next } FNR > 1 && $NF == @B@ { s += "
                     "$@COL@; n++ } END { print (k == 1 && m == @ANS@ && m > s / n) ? \"True\" : "
                     "\"False\" }' mean.txt tumours.csv", **v)),
                 check("invariance", "the mean is over the codebook's malignant code",
                       verdict(fill("test \"$(@CODE@)\" = @M@ && test \"$(cat mean.txt)\" = "
                                    "@ANS@", **v)))]),
        final(answer),
    )


# ----- the reference -----

_TOL = 0.01
_CODE = re.compile(r"(\d+)\s*=\s*malignant")


def _mean(values: list[Fraction]) -> str:
    return f"{float(sum(values, Fraction(0)) / len(values)):.2f}" if values else CANNOT_DETERMINE


def _solve(contents: Contents, *, feature: str) -> str:
    code = _CODE.search(text_of(contents, "codebook.txt"))
    if code is None:
        raise ValueError("codebook.txt does not say which target code is malignant")
    header, rows = read_table(text_of(contents, "tumours.csv"), ",", ("id", "target"))
    if feature not in header:
        return CANNOT_DETERMINE  # the table is there, the asked feature is not
    f, t = column(header, feature), column(header, "target")
    return _mean([Fraction(row[f]) for row in rows if row[t].strip() == code.group(1)])


def _benign(record: bytes, *, code: int = MALIGNANT) -> bool:
    """A row of the other class: the malignant mean never reads it."""
    return tsv_fields(record, b",")[-1].strip() != str(code).encode()


def _tumour_mutant(content: bytes, rng: random.Random, *, kind: str, col: int,
                   code: int = MALIGNANT) -> bytes | None:
    """One malignant value moved enough to move the mean (``shift``), or the benign row
    farthest from the malignant mean relabelled malignant (``relabel``)."""
    lines = lines_of(content)
    rows = {i: tsv_fields(line, b",") for i, line in enumerate(lines[1:], 1)}
    label = str(code).encode()
    bad = {i: Fraction(f[col].decode()) for i, f in rows.items() if f[-1] == label}
    if not bad:
        return None
    if kind == "shift":
        i = rng.choice(sorted(bad))
        rows[i][col] = f"{float(bad[i]) + math.ceil(0.05 * len(bad)) + 1:.2f}".encode()
    else:
        mean = sum(bad.values(), Fraction(0)) / len(bad)
        good = {j: Fraction(f[col].decode()) for j, f in rows.items() if f[-1] != label}
        i = max(good, key=lambda j: abs(good[j] - mean))
        if not moved(_mean(list(bad.values())), _mean([*bad.values(), good[i]]), _TOL):
            return None
        rows[i][-1] = label
    fields = rows[i]
    return edit_lines(content, {i: rejoin(fields, lines[i], b",")})


def _rename_feature(content: bytes, rng: random.Random, *, feature: str) -> bytes | None:
    """The asked feature's column renamed in the header line (no longer named: a check
    that finds the column by name dies, one that pins its position does not)."""
    lines = lines_of(content)
    fields = tsv_fields(lines[0], b",") if lines else []
    if feature.encode() not in fields:
        return None
    renamed = [f"{feature}_{rng.randrange(10**4):04d}".encode() if f == feature.encode() else f
               for f in fields]
    return edit_lines(content, {0: rejoin(renamed, lines[0], b",")})


def _swap_codes(content: bytes, rng: random.Random) -> bytes | None:
    """The codebook's two labels exchanged: malignant gets the other code."""
    text = content.decode()
    swapped = (text.replace("0 = malignant, 1 = benign", "0 = benign, 1 = malignant")
               if "0 = malignant" in text else
               text.replace("1 = malignant, 0 = benign", "1 = benign, 0 = malignant"))
    return swapped.encode() if swapped != text else None


def _renamed_feature(content: bytes, rng: random.Random, *, feature: str) -> bytes | None:
    """Another feature's column renamed in the header (a control): the table is read by
    column name, so the header's text may change where the question does not look."""
    lines = lines_of(content)
    if not lines:
        return None
    names = lines[0].rstrip(b"\r\n").split(b",")
    free = [i for i, n in enumerate(names) if n.decode() in _FEATURES and n.decode() != feature]
    if not free:
        return None
    i = rng.choice(free)
    names[i] = names[i].replace(b"_mean", rng.choice((b"_avg", b"_mean_um", b"_m")))
    return edit_lines(content, {0: b",".join(names) + lines[0][len(lines[0].rstrip(b"\r\n")):]})


def _noted_codebook(content: bytes, rng: random.Random) -> bytes | None:
    """A note added to codebook.txt (a control): the label coding is kept."""
    notes = (b"\nRows are in no particular order.\n", b"\nFeatures computed from digitised "
             b"images.\n", b"\nid is a running number, not a patient identifier.\n")
    end = b"" if content.endswith(b"\n") or not content else b"\n"
    return content + end + rng.choice(notes)


def _reference(feature: str, col: int, code: int = MALIGNANT) -> Reference:
    return Reference(
        solve=partial(_solve, feature=feature),
        preserving={"tumours.csv": ("shuffle_records", "drop_irrelevant"), "codebook.txt": ()},
        irrelevant={"tumours.csv": partial(_benign, code=code)},
        mutators={"tumours.csv": aimed(partial(_tumour_mutant, kind="shift", col=col - 1,
                                               code=code),
                                       partial(_tumour_mutant, kind="relabel", col=col - 1,
                                               code=code),
                                       partial(_rename_feature, feature=feature)),
                  "codebook.txt": aimed(_swap_codes)},
        controls={"tumours.csv": aimed(partial(_renamed_feature, feature=feature)),
                  "codebook.txt": aimed(_noted_codebook)})


def label_coding(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Mean of a feature over malignant tumours (trap: taking ``target == 1`` as malignant;
    at warmup the codebook codes malignant as 1)."""
    code = MALIGNANT if difficulty != "warmup" else 1 - MALIGNANT
    feature = list(_FEATURES)[int(rng.integers(len(_FEATURES)))]
    col = list(_FEATURES).index(feature) + 2
    for _ in range(20):  # float sums may round a mean at x.xx5 either way: redraw those
        target, cents = _table(rng, _ROWS[difficulty])
        bad, good = cents[feature][target == MALIGNANT], cents[feature][target != MALIGNANT]
        if not (_near_tie(int(bad.sum()), len(bad)) or _near_tie(int(good.sum()), len(good))):
            break
    else:
        raise RuntimeError("label_coding: every draw rounds ambiguously; generator bug")
    answer = f"{int(bad.sum()) / len(bad) / 100:.2f}"
    wrong = f"{int(good.sum()) / len(good) / 100:.2f}"
    wrong = answer if code != MALIGNANT else wrong
    careless = fill("awk -F, 'NR > 1 && $NF == 1 { s += $@COL@; n++ } "
                    "END { printf \"%.2f\\n\", s / n }' tumours.csv > mean.txt\ncat mean.txt",
                    COL=col)
    trap = Trap(
        description="target 1 read as malignant; the codebook codes malignant as 0 "
                    "(scikit-learn's convention), so the benign mean is reported",
        careless_solution=(
            turn(careless, node("test", f"mean {feature} of malignant tumours: {wrong}",
                                "mean.txt"), [
                check("range", "the mean is positive",
                      "awk '{ print ($1 > 0) ? \"True\" : \"False\" }' mean.txt")]),
            final(wrong)),
        wrong_answer=wrong)
    question = (f"What is the mean {feature} of the malignant tumours in tumours.csv? "
                "Give two decimals.")
    return Instance(files={"tumours.csv": _csv(target, cents, code).encode(),
                           "codebook.txt": _codebook(code).encode()},
                    question=question, answer=answer, grader={"kind": "numeric", "abs_tol": _TOL},
                    solution=_solution(feature, col, len(target), len(bad), answer,
                                       int(bad.sum()), code), trap=trap,
                    tags=("csv", "label-coding", "codebook"),
                    reference=_reference(feature, col, code))
