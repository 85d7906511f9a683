"""Real tables (CSV): Palmer penguins with ``NA`` strings; breast cancer coded 0 = malignant.

Why these traps.

* ``csv.penguin_mass``: palmerpenguins writes missing measurements as the string ``NA``.
  awk reads ``"NA"`` as 0, so ``sum / count`` over a species' rows averages two
  unweighed birds in as 0 g -- 5035.08 g for Gentoo instead of 5076.02 g, a plausible
  mass and wrong.
* ``csv.cancer_mean``: scikit-learn's copy of the Wisconsin diagnostic table opens with
  ``569,30,malignant,benign``: the class names *in the order of their codes*, so the
  target 0 is malignant. "1 = positive = malignant" is the habit, and it averages the
  benign tumours instead.

The answers are computed here with ``csv`` and ``statistics``; the tests recompute them
with numpy, and the reference solutions with awk (and check with python3).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
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
from vera_env.tasks.undetermined import CANNOT_DETERMINE, with_clause
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["FEATURES", "cancer_mean", "cancer_values", "penguin_mass", "penguin_masses"]

_MASS_SPECIES = ("Adelie", "Gentoo")  # the species with unweighed birds: the trap bites


def _penguin_question(species: str) -> str:
    return with_clause(
        "penguins.csv holds measurements of penguins at Palmer Station, Antarctica. What is "
        f"the mean body mass in grams (body_mass_g) of the {species} penguins whose mass was "
        "measured? Answer with two decimals.")


_PENGUINS = ("python3 -c \"import csv; r = [x for x in csv.DictReader(open('penguins.csv')) if "
             "x['species'] == '@S@']; m = [float(x['body_mass_g']) for x in r if x['body_mass_g'] "
             "!= 'NA']; ")
"""The species' rows ``r`` and weighed masses ``m`` of penguins.csv, by the column names:
the second route every check compares the model's awk files with."""


def _penguin_solution(species: str, n: int, n_na: int, total: float, answer: str
                      ) -> tuple[str, ...]:
    """Select the species' rows, keep the weighed masses, average them.

    Each node's checks recount, from penguins.csv, a different fact the mean is built
    from: the species' rows, how many are NA, how many weighed, their sum, the mean.
    """
    v = {"S": species, "N": n, "NA": n_na, "M": n - n_na, "SUM": f"{total:.2f}", "ANS": answer}
    py = python_check(_PENGUINS, v)
    return (
        turn(fill("head -3 penguins.csv\nawk -F, 'NR > 1 && $1 == \"@S@\"' penguins.csv > "
                  "species.csv\nwc -l < species.csv\nawk -F, '$6 == \"NA\"' species.csv", **v),
             node("load", fill("@N@ @S@ rows: @NA@ without a body mass (NA), @M@ weighed", **v),
                  "species.csv"), [
                 check("conservation", fill("every @S@ row kept: @N@", **v), verdict(fill(
                     "test \"$(wc -l < species.csv)\" -eq @N@ && test \"$(tail -n +2 penguins.csv | "
                     "cut -d, -f1 | grep -cxF @S@)\" -eq @N@", **v))),
                 check("range", fill("column 6 is body_mass_g, NA in @NA@ of the @S@ rows", **v),
                       "test \"$(head -1 penguins.csv | cut -d, -f6)\" = body_mass_g && " + recounted(
                           "cut -d, -f6 species.csv | grep -cx NA",
                           py("sum(x['body_mass_g'] == 'NA' for x in r)"), n_na)),
                 check("type", fill("@M@ rows hold a number in grams", **v), py(fill(
                     "len(m) == @M@ == sum(1 for x in open('species.csv') if x.split(',')[5]"
                     ".replace('.', '', 1).isdigit())", **v)))]),
        turn("awk -F, '$6 != \"NA\" { print $6 }' species.csv > masses.txt\nwc -l < masses.txt\n"
             "awk '{ s += $1 } END { print s }' masses.txt",
             node("transform", fill("@M@ weighed masses, @SUM@ g in all; NA rows (@NA@) left "
                                    "out", **v), "masses.txt", "n1"), [
                 check("conservation", fill("one mass per weighed @S@ penguin: @M@", **v),
                       py("len(open('masses.txt').readlines()) == len(m) == @M@")),
                 check("invariance", fill("they sum to @SUM@ g, as in penguins.csv", **v),
                       py("round(sum(float(x) for x in open('masses.txt')), 2) == round(sum(m), "
                          "2) == @SUM@")),
                 check("conservation", fill("only NA rows dropped: @M@ + @NA@ = @N@",
                                            **v), py("len(open('masses.txt').readlines()) + @NA@ "
                                                     "== len(r) == @N@"))]),
        turn("awk '{ s += $1 } END { printf \"%.2f\\n\", s / NR }' masses.txt > mean.txt\n"
             "cat mean.txt",
             node("test", fill("mean body mass of @M@ weighed @S@ penguins: @ANS@ g", **v),
                  "mean.txt", "n2"), [
                 check("invariance", "a python recomputation from penguins.csv agrees",
                       py("'%.2f' % (sum(m) / len(m)) == open('mean.txt').read().strip() == "
                          "'@ANS@'")),
                 check("conservation", fill("averaged over the @M@ weighed birds, not all @N@ "
                                            "rows", **v),
                       py("len(m) == @M@ and abs(float(open('mean.txt').read()) * @M@ - sum("
                          "float(x) for x in open('masses.txt'))) < 0.005 * @M@"))]),
        final(answer),
    )


def penguin_masses(content: bytes, species: str) -> tuple[int, list[float]]:
    """(rows of ``species``, the masses of those weighed) in a decoded penguins.csv.

    Raises:
        ValueError: Not the palmerpenguins table (no species/body_mass_g, a bad mass).
    """
    try:
        rows = list(csv.DictReader(io.StringIO(content.decode())))
        mine = [r for r in rows if r["species"] == species]
        return len(mine), [float(r["body_mass_g"]) for r in mine if r["body_mass_g"] != "NA"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"penguins.csv: not the penguins table ({exc!r})") from exc


def _penguin_answer(content: bytes, species: str) -> str:
    _, masses = penguin_masses(content, species)
    return f"{sum(masses) / len(masses):.2f}" if masses else CANNOT_DETERMINE


def _penguin_solve(contents: Contents, *, species: str) -> str:
    """The penguin reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return _penguin_answer(content_of(contents, "penguins.csv"), species)


def _is_row(fields: list[bytes]) -> bool:
    mass = fields[5] if len(fields) > 5 else b""
    return mass == b"NA" or mass.replace(b".", b"", 1).isdigit()


def _penguin_reference(species: str) -> Reference:
    """Order-free, and rows of other species are never read; aimed mutants move one weighed
    bird's mass or hide it behind ``NA``."""
    me = species.encode()

    def other_species(record: bytes) -> bool:
        fields = record.rstrip(b"\r\n").split(b",")
        return _is_row(fields) and fields[0] != me

    def weighed(line: bytes) -> bool:
        fields = line.rstrip(b"\r\n").split(b",")
        return fields[0] == me and _is_row(fields) and fields[5] != b"NA"

    def heavier(fields: list[bytes]) -> bool:
        fields[5] = b"%d" % (float(fields[5]) + 900)
        return True

    def unweigh(fields: list[bytes]) -> bool:
        fields[5] = b"NA"
        return True

    name = "penguins.csv"
    return Reference(
        solve=partial(_penguin_solve, species=species),
        preserving={name: ("shuffle_records", "drop_irrelevant")},
        irrelevant={name: other_species},
        mutators={name: (field_mutator(weighed, b",", heavier),
                         field_mutator(weighed, b",", unweigh))})


def penguin_mass(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Mean body mass of one species (trap: ``NA`` read as 0 g)."""
    data = files["penguins.csv"]
    species = _MASS_SPECIES[int(rng.integers(len(_MASS_SPECIES)))]
    n_mine, masses = penguin_masses(data, species)
    answer = _penguin_answer(data, species)
    wrong = f"{sum(masses) / n_mine:.2f}"
    careless = ("awk -F, -v s=" + species + " '$1 == s { t += $6; n++ } END { printf "
                "\"%.2f\\n\", t / n }' penguins.csv")
    trap = careless_trap("NA strings read as 0 g and averaged in", careless,
                         f"mean mass of {species}: {wrong} g", "a positive mass",
                         f"test \"$({careless} | cut -d. -f1)\" -gt 0", wrong)
    instance = Instance(files={"penguins.csv": data},
                        question=_penguin_question(species), answer=answer,
                        grader={"kind": "numeric", "abs_tol": 0.006},
                        solution=_penguin_solution(species, n_mine, n_mine - len(masses),
                                                   sum(masses), answer),
                        trap=trap, tags=("csv", "missing-values", "palmerpenguins"),
                        reference=_penguin_reference(species))
    probe = Probe("Emperor", _penguin_question("Emperor"),
                  "tail -n +2 penguins.csv | cut -d, -f1 | sort -u",
                  "tail -n +2 penguins.csv | wc -l",
                  len(list(csv.DictReader(io.StringIO(data.decode())))))
    reads = Census(f"awk -F, '$1 == \"{species}\" && $6 != \"NA\"' penguins.csv | wc -l",
                   len(masses), f"weighed {species} rows")
    return RealInstance(instance, "penguins.csv", probe, column="body_mass_g", reads=reads)


FEATURES = ("radius", "texture", "perimeter", "area", "smoothness", "compactness",
            "concavity", "concave points", "symmetry", "fractal dimension")


def _cancer_question(feature: int, label: str) -> str:
    return with_clause(
        "breast_cancer.csv is the Wisconsin diagnostic breast cancer table. Its first line "
        "gives the number of tumours and of features, then the class names in the order of "
        "their integer codes, which are in the last column; columns 1 to 10 are the mean "
        f"{', '.join(FEATURES)} of each tumour's nuclei. What is the average of the mean "
        f"{FEATURES[feature]} (column {feature + 1}) over the {label} tumours? Answer with 6 "
        "significant digits.")


_TUMOURS = ("python3 -c \"import math; t = [[float(x) for x in l.split(',')] for l in open("
            "'breast_cancer.csv').readlines()[1:]]; m = [x for x in t if x[30] == 0]; v = [x[@I@] "
            "for x in m]; ")
"""The rows coded 0 (``m``) and their values of the feature (``v``), parsed by python:
the second route the cancer checks compare the model's awk files with."""


def _cancer_facts(col: int, n: int, malignant: list[list[float]], answer: str
                  ) -> dict[str, object]:
    """The values the cancer checks pin, from the rows coded 0 (``fill`` tokens)."""
    values = [row[col - 1] for row in malignant]
    return {"C": col, "I": col - 1, "N": n, "MAL": len(malignant), "BEN": n - len(malignant),
            "SUM": repr(round(math.fsum(values), 6)), "LO": repr(min(values)),
            "HI": repr(max(values)), "ANS": answer}


def _cancer_solution(col: int, n: int, malignant: list[list[float]], answer: str
                     ) -> tuple[str, ...]:
    """Read the class coding off the header, keep the rows coded 0, average one column.

    The checks recount what the mean is built from: the rows coded 0 and their values of
    the feature (count, sum, range), the mean and its denominator. Not every value those
    rows hold: a sum of their 30 columns is a fingerprint of what the question never
    reads, and died on the control that respells the other columns.
    """
    v = _cancer_facts(col, n, malignant, answer)
    py = python_check(_TUMOURS, v)
    return (
        turn("head -1 breast_cancer.csv\nawk -F, 'NR > 1 { print $NF }' breast_cancer.csv | "
             "sort | uniq -c\nawk -F, 'NR > 1 && $31 == 0' breast_cancer.csv > malignant.csv\n"
             "wc -l < malignant.csv",
             node("load", fill("@N@ tumours; code 0 is malignant (@MAL@), 1 benign (@BEN@)",
                               **v), "malignant.csv"), [
                 check("type", fill("the class named first, code 0, is malignant: @MAL@ tumours",
                                    **v), verdict(fill(
                     "test \"$(head -1 breast_cancer.csv | cut -d, -f3)\" = malignant && test "
                     "\"$(wc -l < malignant.csv)\" -eq @MAL@ && test \"$(awk -F, 'NR > 1 && $31 == "
                     "0' breast_cancer.csv | wc -l)\" -eq @MAL@", **v))),
                 check("conservation", fill("the @MAL@ rows kept are those coded 0, with "
                                            "their column @C@", **v), py(
                     "round(math.fsum(float(l.split(',')[@I@]) for l in open('malignant.csv')"
                     "), 6) == round(math.fsum(v), 6) == @SUM@ and all(l.rstrip().endswith(',0'"
                     ") for l in open('malignant.csv'))"))]),
        turn(fill("cut -d, -f@C@ malignant.csv > values.txt\nwc -l < values.txt\nsort -g "
                  "values.txt | sed -n '1p;$p'", **v),
             node("transform", fill("@MAL@ values of column @C@, from @LO@ to @HI@", **v),
                  "values.txt", "n1"), [
                 check("conservation", fill("one value per malignant tumour: @MAL@", **v),
                       py("len(open('values.txt').readlines()) == len(v) == @MAL@")),
                 check("invariance", fill("they sum to @SUM@, as in breast_cancer.csv", **v),
                       py("round(math.fsum(float(x) for x in open('values.txt')), 6) == round("
                          "math.fsum(v), 6) == @SUM@")),
                 check("range", fill("from @LO@ to @HI@, as in breast_cancer.csv", **v),
                       py("[min(map(float, open('values.txt'))), max(map(float, open("
                          "'values.txt')))] == [min(v), max(v)] == [@LO@, @HI@]"))]),
        turn("awk '{ s += $1 } END { printf \"%.6g\\n\", s / NR }' values.txt > mean.txt\n"
             "cat mean.txt",
             node("test", fill("mean of column @C@ over @MAL@ malignant tumours: @ANS@", **v),
                  "mean.txt", "n2"), [
                 check("invariance", "numpy over the rows coded 0 agrees", fill(
                     "python3 -c \"import numpy as np; d = np.loadtxt('breast_cancer.csv', "
                     "delimiter=',', skiprows=1); m = d[d[:, 30] == 0, @I@].mean(); print('%.6g' % "
                     "m == open('mean.txt').read().strip() == '@ANS@')\"", **v)),
                 check("conservation", fill("averaged over the @MAL@ tumours coded 0", **v),
                       py("len(m) == @MAL@ and abs(float(open('mean.txt').read()) * @MAL@ - "
                          "math.fsum(map(float, open('values.txt')))) <= 1e-5 * abs(@SUM@)"))]),
        final(answer),
    )


def _rows_coded(content: bytes, code: int) -> list[list[float]]:
    """The rows of a decoded breast_cancer.csv whose last column is ``code``, parsed."""
    rows = [[float(x) for x in line.split(",")] for line in content.decode().splitlines()[1:]
            if line.strip()]
    return [row for row in rows if row[-1] == code]


def cancer_values(content: bytes, feature: int) -> tuple[dict[str, int], dict[int, list[float]]]:
    """(class name -> code from the header, code -> the feature's values) of a decoded
    breast_cancer.csv.

    Raises:
        ValueError: Not the table (a short header, a row that is not numbers).
    """
    lines = content.decode().splitlines()
    if not lines:
        raise ValueError("breast_cancer.csv is empty")
    code = {name: i for i, name in enumerate(lines[0].split(",")[2:])}
    by: dict[int, list[float]] = {}
    for line in lines[1:]:
        if line.strip():
            row = [float(x) for x in line.split(",")]
            if len(row) <= feature or not math.isfinite(row[-1]):
                raise ValueError(f"breast_cancer.csv: a row that is not a tumour: {line[:60]!r}")
            by.setdefault(int(row[-1]), []).append(row[feature])
    return code, by


def _cancer_answer(content: bytes, feature: int, label: str) -> str:
    code, by = cancer_values(content, feature)
    if label not in code:
        raise ValueError(f"breast_cancer.csv: the header names no class {label!r}")
    values = by.get(code[label], [])
    return f"{sum(values) / len(values):.6g}" if values else CANNOT_DETERMINE


def _cancer_solve(contents: Contents, *, feature: int) -> str:
    """The cancer reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return _cancer_answer(content_of(contents, "breast_cancer.csv"), feature, "malignant")


def _cancer_reference(feature: int, malignant: int, benign: int) -> Reference:
    """Order-free, and benign rows are never read; aimed mutants move one malignant
    tumour's value or relabel a benign tumour as malignant."""
    name = "breast_cancer.csv"

    def coded(c: int) -> Callable[[bytes], bool]:
        tail = b",%d" % c
        return lambda record: record.rstrip(b"\r\n").endswith(tail)

    def larger(fields: list[bytes]) -> bool:
        fields[feature] = b"%.6g" % (1.5 * float(fields[feature]) + 1)
        return True

    def relabel(fields: list[bytes]) -> bool:
        fields[-1] = b"%d" % malignant
        return True

    return Reference(
        solve=partial(_cancer_solve, feature=feature),
        preserving={name: ("shuffle_records", "drop_irrelevant")},
        irrelevant={name: coded(benign)},
        mutators={name: (field_mutator(coded(malignant), b",", larger),
                         field_mutator(coded(benign), b",", relabel))})


def cancer_mean(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Mean of one feature over malignant tumours (trap: code 1 read as malignant)."""
    data = files["breast_cancer.csv"]
    feature = int(rng.integers(len(FEATURES)))
    code, by = cancer_values(data, feature)
    answer = _cancer_answer(data, feature, "malignant")
    wrong = f"{sum(by[1]) / len(by[1]):.6g}"
    careless = (f"awk -F, 'NR > 1 && $31 == 1 {{ s += ${feature + 1}; n++ }} END {{ printf "
                "\"%.6g\\n\", s / n }' breast_cancer.csv")
    trap = careless_trap("target 1 read as malignant; the file codes malignant as 0", careless,
                         f"malignant mean: {wrong}", "a positive mean",
                         f"test \"$({careless} | tr -d .)\" -gt 0", wrong)
    n_rows = sum(len(values) for values in by.values())
    instance = Instance(files={"breast_cancer.csv": data},
                        question=_cancer_question(feature, "malignant"), answer=answer,
                        grader={"kind": "numeric", "rel_tol": 1e-4},
                        solution=_cancer_solution(feature + 1, n_rows, _rows_coded(data, 0), answer),
                        trap=trap, tags=("csv", "label-coding", "scikit-learn"),
                        reference=_cancer_reference(feature, code["malignant"], code["benign"]))
    probe = Probe("borderline", _cancer_question(feature, "borderline"),
                  "head -1 breast_cancer.csv | cut -d, -f3- | tr , '\\n'",
                  "tail -n +2 breast_cancer.csv | wc -l", n_rows)
    reads = Census("awk -F, 'NR > 1 && $31 == 0' breast_cancer.csv | wc -l", len(by[0]),
                   "tumours coded 0 (malignant)")
    return RealInstance(instance, "breast_cancer.csv", probe, reads=reads)
