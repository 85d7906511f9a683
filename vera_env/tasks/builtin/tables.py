"""Tabular family: a column mean where missing values are coded as -999.

Why this trap. Sentinel codes for "not measured" (-999, -9, 9999) are everywhere in
field and lab data, and they are documented in a codebook nobody opens. ``awk '{ s +=
$6 }'`` averages them in: a handful of -999 among ~5000 g body masses moves the mean by
tens to hundreds of grams, and the result still looks like a body mass. The codebook
(``codebook.txt``) says how missing values are coded, so a careful analyst can know.

The ground truth is the mean of the measured values the generator draws (integers, so
the sum is exact); tests recompute it from the CSV with the ``csv`` module.

Each instance's `Reference` recomputes the mean from the decoded CSV by column name
(rows in any order), with the missing-value code read from the codebook. Rows of
another species, or whose value is the code, are never averaged, so they may be
dropped. The aimed mutants move one measured value, or turn the measured value farthest
from the mean into the code (a check that the sentinel is excluded dies on the second),
or rename the asked column in the header ("cannot be determined": the measurement is
no longer named).
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence
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

__all__ = ["SENTINEL", "sentinel_mean"]

SENTINEL = -999
_COLUMNS = ("id", "species", "island", "bill_length_mm", "flipper_length_mm", "body_mass_g",
            "sex")
# species -> (islands, bill mean/sd, flipper mean/sd, body mass mean/sd)
_SPECIES = {
    "Adelie": (("Torgersen", "Biscoe", "Dream"), (38.8, 2.7), (190, 6.5), (3700, 450)),
    "Chinstrap": (("Dream",), (48.8, 3.3), (196, 7.0), (3730, 380)),
    "Gentoo": (("Biscoe",), (47.5, 3.1), (217, 6.5), (5076, 500)),
}
_TARGETS = ("body_mass_g", "flipper_length_mm")
_ROWS = {"warmup": 20, "easy": 150, "medium": 1500, "hard": 20_000, "xl": 400_000}
_CODEBOOK = """penguins.csv: one row per penguin, comma-separated, header in the first line.

id                 integer, unique
species            Adelie, Chinstrap or Gentoo
island             Biscoe, Dream or Torgersen
bill_length_mm     bill length in mm, one decimal
flipper_length_mm  flipper length in mm, integer
body_mass_g        body mass in g, integer
sex                male, female, or NA when not recorded

Missing measurements in the numeric columns are coded as -999.
"""


def _rows(rng: np.random.Generator, n_rows: int, species: str, target: str,
          trapped: bool = True) -> list[dict[str, str]]:
    """Penguin rows; with ``trapped`` some measurements are the -999 code (at warmup none
    is, so a plain mean is right)."""
    names = list(_SPECIES)
    kinds = rng.choice(len(names), size=n_rows)
    rows = []
    for i, k in enumerate(kinds, start=1):
        sp = names[int(k)]
        islands, bill, flipper, mass = _SPECIES[sp]
        rows.append({
            "id": str(i), "species": sp, "island": islands[int(rng.integers(len(islands)))],
            "bill_length_mm": f"{rng.normal(*bill):.1f}",
            "flipper_length_mm": str(int(round(rng.normal(*flipper)))),
            "body_mass_g": str(int(round(rng.normal(*mass) / 25) * 25)),
            "sex": str(rng.choice(["male", "female", "NA"], p=[0.48, 0.48, 0.04])),
        })
    if not trapped:
        return rows
    for measure in _COLUMNS[3:6]:
        for row in rows:
            if rng.random() < 0.04:
                row[measure] = str(SENTINEL)
    group = [r for r in rows if r["species"] == species]
    for row in group[:2]:  # the trap needs at least two sentinels where it is asked
        row[target] = str(SENTINEL)
    return rows


_CODE_OF = "grep -o 'coded as -*[0-9]*' codebook.txt | grep -o -- '-*[0-9]*$'"


def _solution(species: str, target: str, idx: int, n: int, k: int, answer: str,
              total: int) -> tuple[str, ...]:
    """Three nodes whose checks track different facts: the column (the header), the
    missing-value code (codebook.txt) and the sentinels of the species; the kept
    values' count and sum; the mean, recomputed and bounded, with the code read again."""
    v = {"SP": species, "COL": target, "IDX": idx, "N": n, "K": k, "ANS": answer,
         "SUM": total, "CODE": _CODE_OF}
    return (
        turn(fill("head -3 penguins.csv\ncat codebook.txt\n"
                  "head -1 penguins.csv | tr ',' '\\n' | grep -nx '@COL@' | cut -d: -f1 > col.txt\n"
                  "cat col.txt", **v),
             node("load", f"{target} is column {idx}; the codebook codes missing values as -999",
                  "col.txt"), [
                 check("type", f"col.txt points at {target}", verdict(fill(
                     "test \"$(head -1 penguins.csv | cut -d, -f\"$(cat col.txt)\")\" = @COL@",
                     **v))),
                 check("type", "the codebook codes missing measurements as -999", verdict(
                     fill("test \"$(@CODE@)\" = -999 && test -s col.txt", **v))),
                 check("range", f"{n} {species} rows have {target} measured", verdict(fill(
                     "test \"$(awk -F, -v c=\"$(cat col.txt)\" '$2 == \"@SP@\" && $c != -999 "
                     "&& $c != \"NA\" && $c != \"\"' penguins.csv | wc -l)\" -eq @N@", **v)))]),
        turn(fill("awk -F, -v c=\"$(cat col.txt)\" 'NR > 1 && $2 == \"@SP@\" && $c != -999 "
                  "{ print $c }' penguins.csv > values.txt\nwc -l < values.txt", **v),
             node("qc", f"{n} {species} measurements kept, {k} coded -999 dropped",
                  "values.txt", "n1"), [
                 check("range", "no sentinel left", fill(
                     "awk '$1 == -999 || $1 <= 0 { bad = 1 } END { print (NR == @N@ && !bad) ? "
                     "\"True\" : \"False\" }' values.txt", **v)),
                 check("conservation", fill("the kept values sum to @SUM@", **v), verdict(fill(
                     "test \"$(awk '{ s += $1 } END { printf \"%d\", s }' values.txt)\" -eq "
                     "@SUM@", **v))),
                 check("invariance", "no kept value is the codebook's code", verdict(fill(
                     "test \"$(@CODE@)\" = -999 && ! grep -qx -- \"$(@CODE@)\" values.txt && "
                     "test \"$(wc -l < values.txt)\" -eq @N@",
                     **v)))]),
        turn("awk '{ s += $1; n++ } END { printf \"%.2f\\n\", s / n }' values.txt > mean.txt\n"
             "cat mean.txt",
             node("test", f"mean {target} of {species}: {answer} (n={n})", "mean.txt", "n2"), [
                 check("invariance", "a python recomputation agrees", fill(
                     "python3 -c \"v = [float(x) for x in open('values.txt')]; m = "
                     "float(open('mean.txt').read()); print(abs(sum(v) / len(v) - m) < 0.006 "
                     "and m == @ANS@)\"", **v)),
                 check("range", "the mean lies within the measured values", fill(
                       "awk 'NR == FNR { m = $1; next } FNR == 1 { lo = hi = $1 } "
                       "{ if ($1 < lo) lo = $1; if ($1 > hi) hi = $1 } "
                       "END { print (m > lo && m < hi && m == @ANS@) ? \"True\" : \"False\" }' "
                       "mean.txt values.txt", **v)),
                 check("invariance", "the mean excludes exactly the codebook's code", verdict(
                     fill("test \"$(@CODE@)\" = -999 && test \"$(cat mean.txt)\" = @ANS@",
                          **v)))]),
        final(answer),
    )


def _recode(content: bytes, rng: random.Random) -> bytes | None:
    """The codebook's missing-value code changed (-999 to another negative code, drawn:
    -99, -9999, -1, ...): the -999 values become measurements, so the mean moves --
    what a check of the code must see. Drawn, not fixed: each draw moves the codebook's
    digits and bytes by its own amount, so a pin gated on a count of them meets a new
    value on each (one fixed code gave every draw the same counts, and such a pin's
    confirmations were free)."""
    code = rng.choice((b"-99", b"-9999", b"-1", b"-9", b"-99999", b"-888", b"-7777", b"-77"))
    changed = content.replace(b"coded as -999", b"coded as " + code)
    return changed if changed != content else None


# ----- the reference -----

_TOL = 0.01


def _mean(values: Sequence[float]) -> str:
    return f"{math.fsum(values) / len(values):.2f}" if values else CANNOT_DETERMINE


def _solve(contents: Contents, *, species: str, target: str) -> str:
    match = re.search(r"coded as (-?\d+(?:\.\d+)?)", text_of(contents, "codebook.txt"))
    if match is None:
        raise ValueError("codebook.txt does not say how missing measurements are coded")
    header, rows = read_table(text_of(contents, "penguins.csv"), ",", ("species", "id"))
    if target not in header:
        return CANNOT_DETERMINE  # the table is there, the asked measurement is not
    s, t = column(header, "species"), column(header, target)
    values = [float(row[t]) for row in rows if row[s] == species and row[t] not in ("", "NA")]
    return _mean([v for v in values if v != float(match.group(1))])


def _unread(record: bytes, *, species: str, target: int) -> bool:
    """Another species, or the missing-value code: the mean never reads this row."""
    fields = tsv_fields(record, b",")
    return len(fields) > target and (fields[1].decode("utf-8", "replace") != species
                                     or fields[target] == str(SENTINEL).encode())


def _penguin_mutant(content: bytes, rng: random.Random, *, kind: str, species: str,
                    target: int) -> bytes | None:
    """One measured value of the species moved by enough to move the mean (``shift``),
    or the one farthest from the mean coded missing (``unmeasure``)."""
    lines = lines_of(content)
    rows = {i: tsv_fields(line, b",") for i, line in enumerate(lines[1:], 1)}
    measured = {i: int(f[target]) for i, f in rows.items() if len(f) > target and
                f[1].decode() == species and f[target] != str(SENTINEL).encode()}
    if len(measured) < 2:
        return None
    values = list(measured.values())
    mean = math.fsum(values) / len(values)
    if kind == "shift":
        i = rng.choice(sorted(measured))
        new = measured[i] + math.ceil(0.05 * len(values)) + 25
    else:
        i, new = max(measured, key=lambda j: abs(measured[j] - mean)), SENTINEL
        if not moved(_mean(values), _mean([v for j, v in measured.items() if j != i]), _TOL):
            return None
    fields = rows[i]
    fields[target] = str(new).encode()
    return edit_lines(content, {i: rejoin(fields, lines[i], b",")})


def _rename_column(content: bytes, rng: random.Random, *, target: str) -> bytes | None:
    """The asked column renamed in the header line (the measurement is no longer named:
    a check that finds the column by name dies, one that pins its position does not)."""
    lines = lines_of(content)
    fields = tsv_fields(lines[0], b",") if lines else []
    if target.encode() not in fields:
        return None
    renamed = [f"{target.rsplit('_', 1)[0]}_{rng.randrange(10**4):04d}".encode()
               if f == target.encode() else f for f in fields]
    return edit_lines(content, {0: rejoin(renamed, lines[0], b",")})


def _renamed_header(content: bytes, rng: random.Random, *, target: str) -> bytes | None:
    """A column the question never reads renamed in the header (a control): the table is
    read by column name, so the header's text may change where it is not asked about."""
    lines = lines_of(content)
    if not lines:
        return None
    names = lines[0].rstrip(b"\r\n").split(b",")
    free = [i for i, n in enumerate(names) if n in (b"island", b"bill_length_mm", b"sex")
            and n != target.encode()]
    if not free:
        return None
    i = rng.choice(free)
    names[i] = rng.choice((b"Island", b"isle", b"location")) if names[i] == b"island" else \
        rng.choice((b"bill_mm", b"culmen_length_mm")) if names[i] == b"bill_length_mm" else \
        rng.choice((b"Sex", b"sex_recorded"))
    return edit_lines(content, {0: b",".join(names) + lines[0][len(lines[0].rstrip(b"\r\n")):]})


def _noted_codebook(content: bytes, rng: random.Random) -> bytes | None:
    """A note added to codebook.txt (a control): how missing values are coded is kept."""
    notes = (b"\nRows are in no particular order.\n", b"\nCollected 2007-2009.\n",
             b"\nSee the field protocol for the measurement details.\n",
             b"\nVersion 3, revised 14 March 2021.\n", b"\nData from 3 islands, 344 birds.\n",
             b"\nContact: the field station, room 12.\n")
    end = b"" if content.endswith(b"\n") or not content else b"\n"
    return content + end + rng.choice(notes)


def _reference(species: str, target: str) -> Reference:
    col = _COLUMNS.index(target)
    return Reference(
        solve=partial(_solve, species=species, target=target),
        preserving={"penguins.csv": ("shuffle_records", "drop_irrelevant"), "codebook.txt": ()},
        irrelevant={"penguins.csv": partial(_unread, species=species, target=col)},
        mutators={"penguins.csv": aimed(*(partial(_penguin_mutant, kind=kind, species=species,
                                                  target=col) for kind in ("shift", "unmeasure")),
                                        partial(_rename_column, target=target)),
                  "codebook.txt": aimed(_recode)},
        controls={"penguins.csv": aimed(partial(_renamed_header, target=target)),
                  "codebook.txt": aimed(_noted_codebook)})


def sentinel_mean(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Mean of a column for one species, -999 excluded (trap: averaging -999 in; no -999
    at warmup)."""
    species = list(_SPECIES)[int(rng.integers(len(_SPECIES)))]
    target = _TARGETS[int(rng.integers(len(_TARGETS)))]
    rows = _rows(rng, _ROWS[difficulty], species, target, difficulty != "warmup")
    measured = [int(r[target]) for r in rows if r["species"] == species
                and r[target] != str(SENTINEL)]
    n_missing = sum(1 for r in rows if r["species"] == species and r[target] == str(SENTINEL))
    answer = f"{sum(measured) / len(measured):.2f}"
    wrong = (f"{(sum(measured) + SENTINEL * n_missing) / (len(measured) + n_missing):.2f}")
    csv = ",".join(_COLUMNS) + "\n" + "".join(
        ",".join(r[c] for c in _COLUMNS) + "\n" for r in rows)
    idx = _COLUMNS.index(target) + 1
    unit = "g" if target == "body_mass_g" else "mm"
    question = (f"What is the mean {target} ({unit}) of {species} penguins in penguins.csv, "
                "over the penguins where it was measured? Give two decimals.")
    careless = fill("awk -F, 'NR > 1 && $2 == \"@SP@\" { s += $@IDX@; n++ } "
                    "END { printf \"%.2f\\n\", s / n }' penguins.csv", SP=species, IDX=idx)
    trap = Trap(
        description="the -999 codes for missing measurements are averaged in as values",
        careless_solution=(
            turn(careless, node("test", f"mean {target} of {species}: {wrong}"), [
                check("range", "mean is positive", "awk -F, 'NR > 1 && $2 == \"" + species
                      + f"\" {{ s += ${idx}; n++ }} END {{ print (s / n > 0) ? \"True\" : "
                      "\"False\" }' penguins.csv")]),
            final(wrong)),
        wrong_answer=wrong)
    return Instance(files={"penguins.csv": csv.encode(), "codebook.txt": _CODEBOOK.encode()},
                    question=question, answer=answer, grader={"kind": "numeric", "abs_tol": _TOL},
                    solution=_solution(species, target, idx, len(measured), n_missing, answer,
                                       sum(measured)),
                    trap=trap, tags=("csv", "missing-values", "sentinel"),
                    reference=_reference(species, target))
