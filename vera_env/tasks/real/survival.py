"""Real survival table (CSV): Kaplan-Meier median of the NCCTG lung cancer trial.

Why this trap. The same as the builtin ``tab.survival_median``, on a real trial: 63 of
228 patients were alive at their last visit (status 0, censored). The median of the
observed times treats each of them as dying that day, so it comes out months too short
(243 days instead of 306 for ECOG 1). The subject is an ECOG performance-status group,
a real clinical covariate; an ECOG 4 group (bedbound) exists on the scale but not in the
trial, which is what the canary asks about.

The answer is `vera_env.tasks.builtin.survival.km_median` of the group's rows; groups
whose curve passes within 1e-9 of 0.5 are never drawn, so float and exact rational
arithmetic agree (the tests recompute with ``fractions.Fraction``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn
from vera_env.tasks.builtin.survival import km_median
from vera_env.tasks.real.kinds import (
    Census,
    Probe,
    RealInstance,
    careless_trap,
    content_of,
    field_mutator,
    recounted,
)
from vera_env.tasks.undetermined import CANNOT_DETERMINE, with_clause
from vera_env.verification.strength.reference import Contents, Reference

__all__ = ["lung_group", "lung_median"]

_GROUPS = ("0.0", "1.0", "2.0")


def _question(ecog: str) -> str:
    return with_clause(
        "lung.csv is the NCCTG advanced lung cancer trial: time is the number of days from "
        "enrolment to death when status is 1, or to the last contact, alive, when status is 0 "
        "(censored); ph.ecog is the ECOG performance score. What is the Kaplan-Meier median "
        f"survival, in days, of the patients with ph.ecog = {ecog}: the smallest time at which "
        "the Kaplan-Meier estimate of survival is 0.5 or lower? Answer with one integer.")


_KM = ("awk -F'\\t' -v n=\"$(wc -l < group.tsv)\" 'function flush() { if (d > 0) { s *= 1 - "
       "d / r; printf \"%d\\t%d\\t%d\\t%.10f\\n\", t, r, d, s } r -= d + c; d = c = 0 } BEGIN "
       "{ s = 1; r = n } NR > 1 && $1 != t { flush() } { t = $1; if ($2 == 1) d++; else c++ } "
       "END { flush() }' group.tsv > km.tsv\nhead -3 km.tsv\nwc -l < km.tsv")
_GROUP = ("python3 -c \"import csv; from collections import Counter; g = [(int(float(r['time'])), "
          "r['status'] == '1') for r in csv.DictReader(open('lung.csv')) if r['ph.ecog'] == "
          "'@E@']; ")
"""The group's (time, died) pairs read by column name: the checks' second route."""
_CURVE = ("d = Counter(t for t, e in g if e); a = Counter(t for t, _ in g); n, s, c = len(g), "
          "1.0, {}; [(c.__setitem__(t, (n, d[t], (s := s * (1 - d[t] / n)))) if d[t] else None, "
          "n := n - a[t]) for t in sorted(a)]; ")
"""A python product-limit curve of ``g``: death time -> (at risk, deaths, survival)."""


def _group_check(values: Mapping[str, object]) -> Callable[[str], str]:
    """Checks in python3 over the group's (time, died) pairs ``g``: ``code`` prints the
    verdict, its ``@TOKEN@`` s filled from ``values``."""
    def command(code: str) -> str:
        return fill(_GROUP + code + "\"", **values)

    return command


def _solution(ecog: str, n: int, deaths: int, median: int, at_risk: int) -> tuple[str, ...]:
    """Pick the group, build its Kaplan-Meier curve, read the median off it.

    The checks recount from lung.csv what the curve is built from: the group's patients,
    its deaths and its censored patients, the numbers at risk, the survival at each death
    time, and the number still at risk at the median.
    """
    v = {"E": ecog, "N": n, "D": deaths, "C": n - deaths, "ANS": median, "R": at_risk}
    py = _group_check(v)

    def counted(shell: str, code: str, value: int) -> str:
        return recounted(fill(shell, **v), py(f"print({code})"), value)
    return (
        turn(fill("head -3 lung.csv\nawk -F, 'NR > 1 && $6 == \"@E@\" { print $2 \"\\t\" $3 }' "
                  "lung.csv | sort -t\"$(printf '\\t')\" -k1,1n > group.tsv\nwc -l < group.tsv\n"
                  "cut -f2 group.tsv | sort | uniq -c", **v),
             node("load", fill("ECOG @E@: @N@ patients, @D@ deaths, @C@ censored", **v),
                  "group.tsv"), [
                 check("conservation", f"every patient of the group kept: {n}",
                       "test \"$(head -1 lung.csv | cut -d, -f2,3,6)\" = time,status,ph.ecog && "
                       + counted("wc -l < group.tsv", "len(g)", n)),
                 check("conservation", f"{deaths} deaths (status 1)",
                       counted("cut -f2 group.tsv | grep -cx 1", "sum(e for _, e in g)", deaths)),
                 check("conservation", f"{n - deaths} censored, alive at last contact (status 0)",
                       counted("cut -f2 group.tsv | grep -cx 0", "sum(not e for _, e in g)",
                               n - deaths))]),
        turn(_KM, node("transform", fill("Kaplan-Meier curve of ECOG @E@: one row per death "
                                         "time, @D@ deaths", **v), "km.tsv", "n1"), [
            check("conservation", "at each death time, at risk = patients followed that long",
                  py("k = [l.split('\\t') for l in open('km.tsv')]; print(len(g) == @N@ and "
                     "all(int(r) == sum(x >= int(t) for x, _ in g) for t, r, _, _ in k))")),
            check("conservation", fill("every death is on the curve: @D@", **v),
                  py("print(sum(int(l.split('\\t')[2]) for l in open('km.tsv')) == sum(e for "
                     "_, e in g) == @D@)")),
            check("invariance", "the survival at every death time matches a python product-limit "
                                "estimate", py(_CURVE + "k = [l.split('\\t') for l in open("
                                               "'km.tsv')]; print(len(k) == len(c) and all(abs("
                                               "float(x[3]) - c[int(x[0])][2]) < 1e-9 for x in "
                                               "k))"))]),
        turn("awk -F'\\t' '$4 <= 0.5 { print $1; exit }' km.tsv > median.txt\ncat median.txt",
             node("test", fill("Kaplan-Meier median survival at ECOG @E@: @ANS@ days", **v),
                  "median.txt", "n2"), [
                 check("invariance", "a python product-limit recomputation agrees",
                       py(_CURVE + "print(min(t for t in c if c[t][2] <= 0.5) == int(open("
                                   "'median.txt').read()) == @ANS@)")),
                 check("range", fill("@R@ patients still at risk at @ANS@ days", **v), counted(
                     "awk -F'\\t' '$1 == @ANS@ { print $2 }' km.tsv", "sum(t >= @ANS@ for t, _ "
                     "in g)", at_risk))]),
        final(str(median)),
    )


def lung_group(content: bytes, ecog: str) -> tuple[list[int], list[bool]]:
    """(times, died) of the patients with ``ph.ecog == ecog`` in a decoded lung.csv.

    Raises:
        ValueError: Not the lung table (no time/status/ph.ecog column, a bad time --
            an infinite one included).
    """
    try:
        rows = list(csv.DictReader(io.StringIO(content.decode())))
        group = [r for r in rows if r["ph.ecog"] == ecog]
        return [int(float(r["time"])) for r in group], [r["status"] == "1" for r in group]
    except (KeyError, TypeError, OverflowError) as exc:
        raise ValueError(f"lung.csv: not the lung table ({exc!r})") from exc


def _answer(content: bytes, ecog: str) -> str:
    median, _ = km_median(*lung_group(content, ecog))
    return CANNOT_DETERMINE if median is None else str(median)


def _solve(contents: Contents, *, ecog: str) -> str:
    """The reference's solver (module level: `vera_env.tasks.programs` exports it)."""
    return _answer(content_of(contents, "lung.csv"), ecog)


def _reference(ecog: str, median: int) -> Reference:
    """Order-free, and other ECOG groups are never read; aimed mutants turn the death at
    the median into a censoring, or move that patient out of the group (a death earlier
    than the median rarely moves a Kaplan-Meier median: the curve steps past 0.5 anyway)."""
    me, name = ecog.encode(), "lung.csv"

    def fields(record: bytes) -> list[bytes]:
        return record.rstrip(b"\r\n").split(b",")

    def is_row(f: list[bytes]) -> bool:
        return len(f) > 5 and f[1].replace(b".", b"", 1).isdigit()

    def median_death(line: bytes) -> bool:
        f = fields(line)
        return is_row(f) and f[5] == me and f[2] == b"1" and float(f[1]) == median

    def censor(f: list[bytes]) -> bool:
        f[2] = b"0"
        return True

    def regroup(f: list[bytes]) -> bool:
        f[5] = b"3.0"
        return True

    return Reference(
        solve=partial(_solve, ecog=ecog),
        preserving={name: ("shuffle_records", "drop_irrelevant")},
        irrelevant={name: lambda record: is_row(fields(record)) and fields(record)[5] != me},
        mutators={name: (field_mutator(median_death, b",", censor),
                         field_mutator(median_death, b",", regroup))},
        # not transfer_values: the reference checks its whole Kaplan-Meier table, the
        # last times included, against the data
        rewriting={name: ("reformat_numbers", "permute_values", "rename_ids",
                          "respell_fields")})


def lung_median(files: Mapping[str, bytes], rng: np.random.Generator) -> RealInstance:
    """Kaplan-Meier median of one ECOG group (trap: censored patients counted as deaths)."""
    data = files["lung.csv"]
    ecog = _GROUPS[int(rng.integers(len(_GROUPS)))]
    times, died = lung_group(data, ecog)
    median, closest = km_median(times, died)
    if median is None or closest <= 1e-9:
        raise RuntimeError(f"lung_median: ECOG {ecog} has no clean median; pick another group")
    ordered = sorted(times)
    half = len(ordered) // 2
    twice = 2 * ordered[half] if len(ordered) % 2 else ordered[half - 1] + ordered[half]
    wrong = str(twice // 2) if twice % 2 == 0 else f"{twice / 2:.1f}"
    careless = (f"awk -F, '$6 == \"{ecog}\" {{ print $2 }}' lung.csv | sort -n | awk '{{ v[NR] = "
                "$1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'")
    trap = careless_trap("the median of observed times counts censored patients as deaths",
                         careless,
                         f"median survival {wrong} days", "a positive time",
                         f"test \"$({careless} | cut -d. -f1)\" -gt 0", wrong)
    instance = Instance(files={"lung.csv": data}, question=_question(ecog),
                        answer=_answer(data, ecog), grader={"kind": "numeric", "abs_tol": 0},
                        solution=_solution(ecog, len(times), sum(died), median,
                                           sum(t >= median for t in times)), trap=trap,
                        tags=("csv", "survival", "censoring", "lifelines"),
                        reference=_reference(ecog, median))
    probe = Probe("4.0", _question("4.0"), "tail -n +2 lung.csv | cut -d, -f6 | sort -u",
                  "tail -n +2 lung.csv | wc -l", len(list(csv.DictReader(io.StringIO(
                      data.decode())))))
    reads = Census(f"awk -F, '$6 == \"{ecog}\" && $3 == 1' lung.csv | wc -l", sum(died),
                   f"deaths at ph.ecog = {ecog}")
    return RealInstance(instance, "lung.csv", probe, column="status", reads=reads)
