"""Tabular family: a Kaplan-Meier median survival time with censored patients.

Why this trap. "Median survival" sounds like the median of the survival times column.
But a censored time (status 0) is not a death: the patient was last seen alive then and
lived for an unknown time longer. The median of the observed times treats every
censored patient as dying at censoring, so it comes out too short -- a time in days, in
the right range, and wrong. The Kaplan-Meier estimator uses censored patients while they
are at risk and no longer.

The ground truth is the Kaplan-Meier median of the drawn times: the smallest time at
which the product-limit estimate of survival is 0.5 or less. Draws where the curve
passes within 1e-9 of 0.5 are redrawn (double rounding is below 1e-12 here), so any
double-precision implementation and exact rational arithmetic agree; tests recompute it
from the CSV with ``fractions.Fraction``.

Each instance's `Reference` re-estimates the curve from the decoded CSV by column name
(rows in any order; "cannot be determined" when the curve never reaches 0.5). Arm A is
never read, so its rows may be dropped. The aimed mutants censor one arm B death at or
before the median, delay one past it, remove one (the first such edit that moves the
median), or add the fewest patients censored past it that move the median.
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
    column,
    edit_lines,
    lines_of,
    read_table,
    rejoin,
    text_of,
    tsv_fields,
)
from vera_env.tasks.model import Trap
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["km_median", "survival_median"]

_PATIENTS = {"warmup": 13, "easy": 60, "medium": 400, "hard": 4000, "xl": 200_000}  # per arm


def km_median(times: list[int], died: list[bool]) -> tuple[int | None, float]:
    """Kaplan-Meier median and the survival value closest to 1/2 along the curve.

    Returns:
        (median time or None if the curve never reaches 0.5, the smallest distance
        ``|S(t) - 1/2|`` over the curve's steps).
    """
    events: dict[int, list[int]] = {}
    for t, d in zip(times, died, strict=True):
        events.setdefault(t, [0, 0])[0 if d else 1] += 1
    at_risk, surv, median, closest = len(times), 1.0, None, 1.0
    for t in sorted(events):
        deaths, censored = events[t]
        if deaths:
            surv *= 1 - deaths / at_risk
            closest = min(closest, abs(surv - 0.5))
            if median is None and surv <= 0.5:
                median = t
        at_risk -= deaths + censored
    return median, closest


def _arm(rng: np.random.Generator, n: int, median_days: float, censoring: bool = True
         ) -> tuple[list[int], list[bool]]:
    """Weibull event times, censoring by staggered accrual and by dropout (none without
    ``censoring``: at warmup every patient dies in follow-up, and with an odd count the
    median of the times is the Kaplan-Meier median)."""
    shape = rng.uniform(0.9, 1.6)
    scale = median_days / np.log(2) ** (1 / shape)
    event = np.ceil(scale * rng.weibull(shape, n)).astype(np.int64)
    follow_up = rng.uniform(300, 2400, n)
    dropout = np.where(rng.random(n) < 0.15, rng.uniform(10, 1500, n), np.inf)
    censor = np.ceil(np.minimum(follow_up, dropout)).astype(np.int64)
    died = event <= censor if censoring else np.ones(n, dtype=bool)
    return np.where(died, event, censor).tolist(), died.tolist()


def _careless_median(times: list[int]) -> str:
    """The median of the observed times, printed as awk's ``print`` would."""
    ordered, n = sorted(times), len(times)
    twice = ordered[n // 2] * 2 if n % 2 else ordered[n // 2 - 1] + ordered[n // 2]
    return str(twice // 2) if twice % 2 == 0 else f"{twice / 2:.1f}"


_KM = ("awk -F'\\t' -v n=\"$(wc -l < arm_b.tsv)\" 'function flush() { if (d > 0) { s *= 1 - "
       "d / r; printf \"%d\\t%d\\t%d\\t%.10f\\n\", t, r, d, s } r -= d + c; d = c = 0 } BEGIN "
       "{ s = 1; r = n } NR > 1 && $1 != t { flush() } { t = $1; if ($2 == 1) d++; else c++ } "
       "END { flush() }' arm_b.tsv > km.tsv\nawk -F'\\t' '$4 <= 0.5 { print $1; exit }' km.tsv "
       "> median.txt\ntail -3 km.tsv\ncat median.txt")
_PY_MEDIAN = ("python3 -c \"from collections import Counter; rows = [l.split(',') for l in "
              "open('survival.csv')][1:]; b = [(int(r[2]), r[3].strip() == '1') for r in rows "
              "if r[1] == 'B']; d = Counter(t for t, e in b if e); g = Counter(t for t, _ in b); "
              "n, s, m = len(b), 1.0, []; [(m.append(t) if (s := s * (1 - d[t] / n)) <= 0.5 "
              "else None, n := n - g[t]) for t in sorted(g)]; print(len(b) == @N@ and m[0] == "
              "int(open('median.txt').read()) == @ANS@)\"")


def _solution(n: int, deaths: int, median: int, by_median: int, total: int, wrong: str,
              at_risk: int) -> tuple[str, ...]:
    """Three nodes over facts the aimed mutants move in different combinations: the
    patients, the deaths, the deaths by the median, the follow-up total, the censored."""
    v = {"N": n, "D": deaths, "ANS": median, "DM": by_median, "T": total, "C": n - deaths,
         "W": wrong, "R": at_risk}
    return (
        turn("head -3 survival.csv\nawk -F, 'NR > 1 && $2 == \"B\" { print $3 \"\\t\" $4 }' "
             "survival.csv | sort -t\"$(printf '\\t')\" -k1,1n > arm_b.tsv\nwc -l < arm_b.tsv\n"
             "cut -f2 arm_b.tsv | sort | uniq -c",
             node("load", fill("arm B: @N@ patients, @D@ deaths, the rest censored", **v),
                  "arm_b.tsv"), [
                 check("conservation", "every arm B patient kept, times sorted", verdict(fill(
                     "test \"$(awk -F, '$2 == \"B\"' survival.csv | wc -l)\" -eq @N@ && "
                     "sort -c -t\"$(printf '\\t')\" -k1,1n arm_b.tsv && "
                     "test \"$(wc -l < arm_b.tsv)\" -eq @N@", **v))),
                 check("range", "deaths are status 1, the rest status 0", fill(
                     "awk -F'\\t' '$2 == 1 { d++ } $2 != 0 && $2 != 1 { bad = 1 } "
                     "END { print (!bad && d == @D@) ? \"True\" : \"False\" }' arm_b.tsv", **v)),
                 check("conservation", fill("@T@ days of follow-up in arm B", **v), verdict(
                     fill("test \"$(awk -F'\\t' '{ s += $1 } END { print s }' arm_b.tsv)\" -eq "
                          "@T@ && test \"$(awk -F, '$2 == \"B\" { s += $3 } END { print s }' "
                          "survival.csv)\" -eq @T@", **v)))]),
        turn(_KM, node("transform", fill("Kaplan-Meier estimate of arm B; median @ANS@ days",
                                         **v), "km.tsv", "n1"), [
            check("range", "survival falls, within [0, 1], and crosses 0.5 at the median", fill(
                "awk -F'\\t' '$4 > p && NR > 1 || $4 < 0 || $4 > 1 { bad = 1 } $1 == @ANS@ "
                "{ hit = $4 <= 0.5 && p > 0.5 } { p = $4 } END { print (!bad && hit) ? \"True\" : "
                "\"False\" }' km.tsv", **v)),
            check("conservation", fill("@DM@ deaths on the curve by the median", **v), fill(
                "awk -F'\\t' '$1 <= @ANS@ { d += $3 } END { print (d == @DM@) ? \"True\" : "
                "\"False\" }' km.tsv", **v)),
            check("range", fill("@R@ patients at risk at the median", **v), verdict(fill(
                "test \"$(cat median.txt)\" -eq @ANS@ && "
                "test \"$(awk -F'\\t' '$1 == @ANS@ { print $2 }' km.tsv)\" -eq @R@", **v)))]),
        turn("cat median.txt", node("test", fill("Kaplan-Meier median survival of arm B: @ANS@ "
                                                 "days", **v), "median.txt", "n2"), [
            check("invariance", "an exact recomputation with fractions agrees",
                  fill(_PY_MEDIAN, **v)),
            check("range", fill("@C@ censored patients are not counted as deaths", **v),
                  verdict(fill("test \"$(awk -F'\\t' '$2 == 0' arm_b.tsv | wc -l)\" -eq @C@",
                               **v))),
            check("range", fill("the median of observed times, @W@, is not the answer"
                                if wrong != str(median) else
                                "without censoring the median of the times, @W@, agrees", **v),
                  verdict(fill("test \"$(cut -f1 arm_b.tsv | awk '{ v[NR] = $1 } END { print "
                               "(NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')\" "
                               "= @W@ && test \"$(cat median.txt)\" -eq @ANS@ && "
                               "test @W@ @OP@ \"$(cat median.txt)\"",
                               OP="!=" if wrong != str(median) else "=", **v)))]),
        final(str(median)),
    )


# ----- the reference -----

_ARM = "B"


def _median(text: str) -> str:
    header, rows = read_table(text, ",", ("arm", "time_days", "status"))
    a, t, d = (column(header, name) for name in ("arm", "time_days", "status"))
    arm = [row for row in rows if row[a] == _ARM]
    if any(row[d] not in ("0", "1") for row in arm):
        raise ValueError("a status other than 0 (censored) or 1 (death)")
    median, _ = km_median([int(row[t]) for row in arm], [row[d] == "1" for row in arm])
    return CANNOT_DETERMINE if median is None else str(median)


def _solve(contents: Contents) -> str:
    return _median(text_of(contents, "survival.csv"))


def _other_arm(record: bytes) -> bool:
    """A patient of arm A: arm B's curve never reads this row."""
    fields = tsv_fields(record, b",")
    return len(fields) > 1 and fields[1].decode("utf-8", "replace") != _ARM


def _km_mutant(content: bytes, rng: random.Random, *, kind: str) -> bytes | None:
    """One arm B patient edited; the first candidate that moves the median. A death at or
    before the median censored (``censor``: one death fewer), moved to twice the median
    (``delay``: the same deaths, other times) or removed (``drop``: one patient fewer);
    or the fewest new patients censored past the median added (``late``: the same
    deaths, more at risk). Each moves a different set of the patients,
    deaths, deaths by the median and time total the solution's checks pin."""
    base = _median(content.decode())
    if base == CANNOT_DETERMINE:
        return None
    lines = lines_of(content)
    picked = [i for i, line in enumerate(lines[1:], 1) if (f := tsv_fields(line, b","))[1:2]
              == [_ARM.encode()] and f[3:4] == [b"1"] and int(f[2]) <= int(base)]
    if kind == "late":
        return _censor_late(content, base)
    for i in rng.sample(picked, min(len(picked), 30)):
        fields = tsv_fields(lines[i], b",")
        if kind == "censor":
            fields[3] = b"0"
        elif kind == "delay":
            fields[2] = b"%d" % (2 * int(base) + 1)
        edit = b"" if kind == "drop" else rejoin(fields, lines[i], b",")
        edited = edit_lines(content, {i: edit})
        if _median(edited.decode()) != base:
            return edited
    return None


def _censor_late(content: bytes, base: str) -> bytes | None:
    """The fewest (1, 2, 4, ...) new arm B patients censored past twice the median, until
    the median moves: more at risk before it, so every death weighs less."""
    tail = b"" if content.endswith(b"\n") else b"\n"
    row = b"X%d,%s,%d,0\n"
    k, most = 1, 4 * content.count(b"\n") + 4
    while k <= most:
        added = b"".join(row % (j, _ARM.encode(), 2 * int(base) + 1) for j in range(k))
        edited = content + tail + added
        if _median(edited.decode()) != base:
            return edited
        k *= 2
    return None


def _renamed_patients(content: bytes, rng: random.Random) -> bytes | None:
    """Every patient_id replaced (another prefix, width and numbering): a control, since
    the question never reads the identifiers. Pins of the sorted lines, their first or
    last bytes or their digits die here; checks of arm, time and status hold."""
    lines = lines_of(content)
    if len(lines) < 2:
        return None
    prefix = rng.choice((b"PT", b"S", b"ID", b"pat"))
    width, start = rng.randint(6, 9), rng.randrange(1, 10**5)
    out = [lines[0]]
    for k, line in enumerate(lines[1:]):
        fields = tsv_fields(line, b",")
        fields[0] = prefix + b"%0*d" % (width, start + 7 * k)
        out.append(rejoin(fields, line, b","))
    return b"".join(out)


_REFERENCE = Reference(
    solve=_solve,
    preserving={"survival.csv": ("shuffle_records", "drop_irrelevant")},
    irrelevant={"survival.csv": _other_arm},
    mutators={"survival.csv": aimed(*(partial(_km_mutant, kind=k)
                                      for k in ("censor", "delay", "drop", "late")))},
    controls={"survival.csv": aimed(_renamed_patients)})


def survival_median(rng: np.random.Generator, difficulty: Difficulty) -> Instance:
    """Kaplan-Meier median of arm B (trap: the median of observed times, censoring ignored;
    nobody is censored at warmup)."""
    n, trapped = _PATIENTS[difficulty], difficulty != "warmup"
    for _ in range(50):
        arm_a = _arm(rng, n, float(rng.uniform(300, 700)), trapped)
        arm_b = _arm(rng, n, float(rng.uniform(400, 900)), trapped)
        median, closest = km_median(*arm_b)
        wrong = _careless_median(arm_b[0])
        if median is not None and closest > 1e-9 and (wrong != str(median)) == trapped:
            break
    else:
        raise RuntimeError("survival_median: no usable draw; generator bug")
    rows = [(arm, t, d) for arm, (times, died) in (("A", arm_a), ("B", arm_b))
            for t, d in zip(times, died, strict=True)]
    rows = [rows[i] for i in rng.permutation(len(rows))]
    csv = "patient_id,arm,time_days,status\n" + "".join(
        f"P{i + 1:05d},{arm},{t},{int(d)}\n" for i, (arm, t, d) in enumerate(rows))
    careless = ("awk -F, 'NR > 1 && $2 == \"B\" { print $3 }' survival.csv | sort -n | awk "
                "'{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + "
                "v[NR / 2 + 1]) / 2 }' > median.txt\ncat median.txt")
    trap = Trap(
        description="the median of observed times treats censored patients as deaths",
        careless_solution=(
            turn(careless, node("test", f"median survival of arm B: {wrong} days",
                                "median.txt"), [
                check("range", "the median is positive",
                      "awk '{ print ($1 > 0) ? \"True\" : \"False\" }' median.txt")]),
            final(wrong)),
        wrong_answer=wrong)
    question = ("survival.csv lists patients of a two-arm trial: time_days is the time to "
                "death when status is 1, or to the last visit, alive, when status is 0 "
                "(censored). What is the Kaplan-Meier median overall survival of arm B, in "
                "days: the smallest time at which the Kaplan-Meier estimate of survival is 0.5 "
                "or lower? Answer with one integer.")
    return Instance(files={"survival.csv": csv.encode()}, question=question,
                    answer=str(median), grader={"kind": "numeric", "abs_tol": 0},
                    solution=_solution(n, sum(arm_b[1]), median, sum(
                        1 for t, d in zip(*arm_b, strict=True) if d and t <= median),
                        sum(arm_b[0]), wrong, sum(t >= median for t in arm_b[0])), trap=trap,
                    tags=("csv", "survival", "censoring", "kaplan-meier"), reference=_REFERENCE)
