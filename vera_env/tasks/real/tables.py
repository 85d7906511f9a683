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
from collections.abc import Mapping

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
from vera_env.tasks.real.kinds import Probe, RealInstance, careless_trap
from vera_env.tasks.undetermined import with_clause

__all__ = ["FEATURES", "cancer_mean", "penguin_mass"]

_MASS_SPECIES = ("Adelie", "Gentoo")  # the species with unweighed birds: the trap bites


def _penguin_question(species: str) -> str:
    return with_clause(
        "penguins.csv holds measurements of penguins at Palmer Station, Antarctica. What is "
        f"the mean body mass in grams (body_mass_g) of the {species} penguins whose mass was "
        "measured? Answer with two decimals.")


def _penguin_solution(species: str, n: int, n_na: int, answer: str) -> tuple[str, ...]:
    v = {"S": species, "N": n, "NA": n_na, "M": n - n_na, "ANS": answer}
    py = fill("python3 -c \"import csv; m = [float(r['body_mass_g']) for r in csv.DictReader("
              "open('penguins.csv')) if r['species'] == '@S@' and r['body_mass_g'] != 'NA']; "
              "print(len(m) == @M@ and '%.2f' % (sum(m) / len(m)) == open('mean.txt').read()"
              ".strip() == '@ANS@')\"", **v)
    return (
        turn(fill("head -3 penguins.csv\nawk -F, 'NR > 1 && $1 == \"@S@\"' penguins.csv > "
                  "species.csv\nwc -l < species.csv\nawk -F, '$6 == \"NA\"' species.csv", **v),
             node("load", fill("@N@ @S@ rows, @NA@ without a body mass (NA)", **v),
                  "species.csv"), [
                 check("type", "column 6 is body_mass_g", verdict(
                     "test \"$(head -1 penguins.csv | cut -d, -f6)\" = body_mass_g")),
                 check("conservation", fill("every @S@ row kept, @NA@ of them NA", **v), fill(
                     "awk -F, '$1 == \"@S@\" { n++ } $1 == \"@S@\" && $6 == \"NA\" { na++ } END "
                     "{ print (n == @N@ && na == @NA@) ? \"True\" : \"False\" }' penguins.csv",
                     **v))]),
        turn("awk -F, '$6 != \"NA\" { s += $6; n++ } END { printf \"%.2f\\n\", s / n }' "
             "species.csv > mean.txt\ncat mean.txt",
             node("test", fill("mean body mass of @M@ weighed @S@ penguins: @ANS@ g", **v),
                  "mean.txt", "n1"), [
                 check("invariance", "a python recomputation from penguins.csv agrees", py)]),
        final(answer),
    )


def penguin_mass(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Mean body mass of one species (trap: ``NA`` read as 0 g)."""
    text = files["penguins.csv"].decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    species = _MASS_SPECIES[int(rng.integers(len(_MASS_SPECIES)))]
    mine = [r for r in rows if r["species"] == species]
    masses = [float(r["body_mass_g"]) for r in mine if r["body_mass_g"] != "NA"]
    answer = f"{sum(masses) / len(masses):.2f}"
    wrong = f"{sum(masses) / len(mine):.2f}"
    careless = ("awk -F, -v s=" + species + " '$1 == s { t += $6; n++ } END { printf "
                "\"%.2f\\n\", t / n }' penguins.csv")
    trap = careless_trap("NA strings read as 0 g and averaged in", careless,
                         f"mean mass of {species}: {wrong} g", "a positive mass",
                         f"test \"$({careless} | cut -d. -f1)\" -gt 0", wrong)
    instance = Instance(files={"penguins.csv": files["penguins.csv"]},
                        question=_penguin_question(species), answer=answer,
                        grader={"kind": "numeric", "abs_tol": 0.006},
                        solution=_penguin_solution(species, len(mine), len(mine) - len(masses),
                                                   answer),
                        trap=trap, tags=("csv", "missing-values", "palmerpenguins"))
    probe = Probe("Emperor", _penguin_question("Emperor"),
                  "tail -n +2 penguins.csv | cut -d, -f1 | sort -u",
                  "tail -n +2 penguins.csv | wc -l",
                  len(rows))
    return RealInstance(instance, "penguins.csv", probe, column="body_mass_g")


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


def _cancer_solution(col: int, n: int, n_mal: int, answer: str) -> tuple[str, ...]:
    v = {"C": col, "I": col - 1, "N": n, "MAL": n_mal, "BEN": n - n_mal, "ANS": answer}
    return (
        turn("head -1 breast_cancer.csv\nawk -F, 'NR > 1 { print $NF }' breast_cancer.csv | "
             "sort | uniq -c",
             node("load", fill("@N@ tumours; code 0 is malignant (@MAL@), 1 benign (@BEN@)",
                               **v)), [
                 check("type", "the class named first, code 0, is malignant", verdict(
                     "test \"$(head -1 breast_cancer.csv | cut -d, -f3)\" = malignant")),
                 check("conservation", fill("@MAL@ of @N@ tumours coded 0", **v), fill(
                     "awk -F, 'NR > 1 && $31 == 0 { m++ } NR > 1 { n++ } END { print (m == @MAL@ "
                     "&& n == @N@) ? \"True\" : \"False\" }' breast_cancer.csv", **v))]),
        turn(fill("awk -F, 'NR > 1 && $31 == 0 { s += $@C@; n++ } END { printf \"%.6g\\n\", "
                  "s / n }' breast_cancer.csv > mean.txt\ncat mean.txt", **v),
             node("test", fill("mean of column @C@ over @MAL@ malignant tumours: @ANS@", **v),
                  "mean.txt", "n1"), [
                 check("invariance", "numpy over the rows coded 0 agrees", fill(
                     "python3 -c \"import numpy as np; d = np.loadtxt('breast_cancer.csv', "
                     "delimiter=',', skiprows=1); m = d[d[:, 30] == 0, @I@].mean(); print(("
                     "d[:, 30] == 0).sum() == @MAL@ and '%.6g' % m == open('mean.txt').read()"
                     ".strip() == '@ANS@')\"", **v))]),
        final(answer),
    )


def cancer_mean(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Mean of one feature over malignant tumours (trap: code 1 read as malignant)."""
    data = files["breast_cancer.csv"]
    lines = data.decode().splitlines()
    head = lines[0].split(",")
    rows = [[float(x) for x in line.split(",")] for line in lines[1:] if line.strip()]
    feature = int(rng.integers(len(FEATURES)))
    code = {name: i for i, name in enumerate(head[2:])}
    by = {c: [r[feature] for r in rows if int(r[-1]) == c] for c in (0, 1)}
    answer = f"{sum(by[code['malignant']]) / len(by[code['malignant']]):.6g}"
    wrong = f"{sum(by[1]) / len(by[1]):.6g}"
    careless = (f"awk -F, 'NR > 1 && $31 == 1 {{ s += ${feature + 1}; n++ }} END {{ printf "
                "\"%.6g\\n\", s / n }' breast_cancer.csv")
    trap = careless_trap("target 1 read as malignant; the file codes malignant as 0", careless,
                         f"malignant mean: {wrong}", "a positive mean",
                         f"test \"$({careless} | tr -d .)\" -gt 0", wrong)
    instance = Instance(files={"breast_cancer.csv": data},
                        question=_cancer_question(feature, "malignant"), answer=answer,
                        grader={"kind": "numeric", "rel_tol": 1e-4},
                        solution=_cancer_solution(feature + 1, len(rows), len(by[0]), answer),
                        trap=trap, tags=("csv", "label-coding", "scikit-learn"))
    probe = Probe("borderline", _cancer_question(feature, "borderline"),
                  "head -1 breast_cancer.csv | cut -d, -f3- | tr , '\\n'",
                  "tail -n +2 breast_cancer.csv | wc -l", len(rows))
    return RealInstance(instance, "breast_cancer.csv", probe)
