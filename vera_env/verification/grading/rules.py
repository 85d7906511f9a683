"""The rule graders (exact, numeric, set, choice, regex): wrapping is forgiven, content is not.

Answers come out of free text, and the seed runs recorded what models attach to them:
``'Norovirus GII</command>'``, ``**5076.02**``, ``5,076.02 g``, ``"Gentoo".``. A
grader that compares strings verbatim scores all of those as wrong, a false training
signal, so every rule first removes the *wrapping* (markup, quotes, trailing
punctuation) and then compares the *content*.

The numeric rule reads the one number an answer gives, in a sentence or alone. Two
measured mistakes shaped it: reading the *leading* number graded ``"3612.78 (or
3151.60 ...)"`` as 3612.78 -- a hedge that pays whenever either value is right -- and
refused ``"The longest ORF is 112 amino acids."``, a plain answer. So an answer with two
candidate values is refused and an answer whose only number is the value passes
(`parse_number`).

A rule either decides (``Grade``) or, when the ground truth or the spec cannot be
applied at all, raises ``GraderError``: a broken task is the harness's fault, never a
wrong answer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from vera_env.errors import GraderError
from vera_env.verification.grading.spec import GraderSpec

__all__ = ["Grade", "grade_against", "normalise_text", "parse_number", "split_items",
           "strip_wrapping"]


@dataclass(frozen=True, slots=True)
class Grade:
    """The verdict on one answer: a grader that cannot reach one raises ``GraderError``.

    Attributes:
        correct: Whether the answer matches the ground truth.
        detail: Why, in words a person reading a transcript can check.
    """

    correct: bool
    detail: str


# Markup a model leaves around an answer: protocol tags, code fences, inline code, bold.
_TAGS = re.compile(r"</?(?:command|node|check|think|answer|tool_call)\s*/?>", re.I)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*")
_PREFIX = re.compile(r"^\s*(?:final\s+answer|answer)\s*[:=]\s*", re.I)
_QUOTES = "\"'`“”‘’«»"
_TRAILING_PUNCT = ".,;:!?"


def strip_wrapping(text: str) -> str:
    """Remove markup, an echoed answer prefix, quotes and bold around an answer."""
    out = _FENCE.sub(" ", _TAGS.sub(" ", text)).strip()
    out = _PREFIX.sub("", out)
    for _ in range(4):  # models stack wrappers: **"x"**.
        before = out
        out = out.strip().rstrip(_TRAILING_PUNCT).strip()
        for mark in ("**", "__", "*", "_"):
            if len(out) > 2 * len(mark) and out.startswith(mark) and out.endswith(mark):
                out = out[len(mark):-len(mark)]
        if len(out) >= 2 and out[0] in _QUOTES and out[-1] in _QUOTES:
            out = out[1:-1]
        if out == before:
            break
    return out.strip()


def normalise_text(text: str) -> str:
    """Canonical form for string comparison.

    Strips the wrapping a model adds (tags, fences, backticks, bold, quotes, an echoed
    ``FINAL ANSWER:``, trailing punctuation), collapses whitespace and casefolds.

    Args:
        text: A raw answer or ground truth.

    Returns:
        The normalised string ("" when nothing is left).
    """
    return " ".join(strip_wrapping(text).split()).casefold()


_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_SUPERSCRIPT_POWER = re.compile(r"10([⁰¹²³⁴⁵⁶⁷⁸⁹⁻]+)")
# One number as models write it: a sign, thousands groups or plain digits, decimals, an
# exponent (3.1e-4, 3.1 x 10^-4, 10^6). No quantifier nests, so a megabyte of digits
# scans in linear time; the value is read by float(), which takes any length.
_NUMBER = re.compile(
    r"""(?P<sign>[-+])?
    (?P<mant>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)
    (?:[eE](?P<exp>[-+]?\d+)
      |[ \t]*[x×*·][ \t]*10[ \t]*(?:\^|\*\*)[ \t]*(?P<pow>[-+]?\d+)
      |[ \t]*(?:\^|\*\*)[ \t]*(?P<base_pow>[-+]?\d+))?""",
    re.X,
)
_ORDINAL = re.compile(r"(?:st|nd|rd|th)\b", re.I)
_PERCENT = re.compile(r"[ \t]*(?:%|percent\b)", re.I)
# "5076.02 ± 504.1": the number after ± is the value's uncertainty, not a candidate.
_UNCERTAINTY = re.compile(r"(?:±|\+/-|\+-)[ \t]*[-+]?$")
# "< 0.05", "at least 5076", "5 or more": a bound is not a value.
_BOUND_BEFORE = re.compile(
    r"(?:[<>≤≥⩽⩾]=?|\b(?:at\s+(?:least|most)|(?:more|less|fewer|greater|smaller|higher|"
    r"lower)\s+than|up\s+to|below|above|under|over|exceed(?:s|ing)?))\s*[:=]?\s*[-+]?$",
    re.I)
_BOUND_AFTER = re.compile(r"\s*(?:\+(?=\s|$|[,;)])|or\s+(?:more|less|fewer|greater|higher|lower|"
                          r"above|below|over|under)\b)", re.I)
_WINDOW = 40  # characters looked at around a number for ±, a bound, a percent sign


def _is_identifier_digit(text: str, match: re.Match[str]) -> bool:
    """Digits inside a name or an ordinal are not values: TP53, chr7, COVID-19, 2nd."""
    before = text[match.start() - 1] if match.start() else ""
    return before.isalpha() or before == "_" or bool(_ORDINAL.match(text, match.end()))


def _value(match: re.Match[str]) -> float | None:
    if match["base_pow"] is not None:  # 10^6 is a number; 2^10 is a calculation
        if match["mant"] != "10":
            return None
        mantissa, exponent = "1", match["base_pow"]
    else:
        mantissa, exponent = match["mant"].replace(",", ""), match["exp"] or match["pow"] or "0"
    value = float(f"{mantissa}e{exponent}")  # one rounding, any length, no overflow error
    value = -value if match["sign"] == "-" else value
    return value if math.isfinite(value) else None


def parse_number(text: str) -> tuple[float, bool] | None:
    """Read the one number an answer gives.

    The answer may be the number alone or a sentence around it ("The longest ORF is
    112 amino acids."), with thousands separators (``1,234``), a sign (ASCII or Unicode
    minus), an exponent (``3.1e-4``, ``3.1 × 10^-4``, ``3.1×10⁻⁴``, ``10^6``), a unit
    and a percent sign. Digits inside names and ordinals (``TP53``, ``chr7``, ``2nd``)
    are not numbers, nor is an uncertainty after ``±``. The answer must hold exactly
    one other number: ``3612.78 (or 3151.60)``, ``36-37``, ``36 or 37``, ``1, 2, 3``
    and ``Gentoo (n=124): 5076.02`` are refused, because a grader that picks the
    matching number out of several rewards hedging; so is a bound (``< 0.05``, ``at
    least 12``, ``5 or more``), which is not a value.

    Args:
        text: A raw answer.

    Returns:
        ``(value, is_percent)``, or None when the answer does not give exactly one
        finite number.
    """
    cleaned = _SUPERSCRIPT_POWER.sub(lambda m: "10^" + m.group(1).translate(_SUPERSCRIPTS),
                                     strip_wrapping(text).replace("−", "-"))
    found: re.Match[str] | None = None
    for match in _NUMBER.finditer(cleaned):
        digits = match.start("mant")
        if _is_identifier_digit(cleaned, match) or _UNCERTAINTY.search(
                cleaned, max(0, digits - _WINDOW), digits):
            continue
        if found is not None:
            return None  # a second candidate: not one number, refuse to pick
        found = match
    if found is None or _BOUND_BEFORE.search(cleaned, max(0, found.start("mant") - _WINDOW),
                                             found.start("mant")):
        return None
    if _BOUND_AFTER.match(cleaned, found.end()):
        return None
    value = _value(found)
    return None if value is None else (value, bool(_PERCENT.match(cleaned, found.end())))


_STRONG_SEPARATORS = re.compile(r"[,;|\n\t]|\s+(?:and|&)\s+", re.I)
_BRACKETS = "[]{}()"


def split_items(text: str) -> frozenset[str]:
    """Split a set answer into normalised items.

    Comma, semicolon, pipe, newline, tab and the word "and" (or ``&``) separate items, so
    ``"TP53, BRCA1"``, ``"brca1; tp53"`` and ``"TP53 and BRCA1"`` are the same set. An
    answer with none of those is split on whitespace (``"TP53 BRCA1"``). Whitespace is
    not a separator otherwise, so multi-word items keep their words together:
    ``"Homo musculus, Mus sapiens"`` is not ``"Homo sapiens, Mus musculus"``.

    Args:
        text: A raw answer.

    Returns:
        The set of normalised items (empty when the answer has none).
    """
    body = strip_wrapping(text).strip(_BRACKETS + " ")
    parts = _STRONG_SEPARATORS.split(body) if _STRONG_SEPARATORS.search(body) else body.split()
    items = (normalise_text(part.strip(_BRACKETS + " ")) for part in parts)
    return frozenset(item for item in items if item and item not in {"and", "&"})


def _grade_exact(truth: str, answer: str) -> Grade:
    ok = normalise_text(answer) == normalise_text(truth)
    return Grade(ok, "matches the expected answer" if ok
                 else f"expected {truth!r} (normalised), got {normalise_text(answer)!r}")


def _grade_numeric(spec: GraderSpec, truth: str, answer: str) -> Grade:
    expected, got = parse_number(truth), parse_number(answer)
    if expected is None:  # Task validation prevents this; a broken task is not the model's fault
        raise GraderError(f"numeric grader: the ground truth {truth!r} is not one number")
    if got is None:
        return Grade(False, f"answer {answer[:80]!r} does not give exactly one number "
                            f"(a hedge or a bound is refused); expected {truth}")
    (target, truth_pct), (value, answer_pct) = expected, got
    # "12.5%" and "0.125" name the same quantity when exactly one side says percent.
    candidates = [value]
    if answer_pct and not truth_pct:
        candidates.append(value / 100)
    elif truth_pct and not answer_pct:
        candidates.append(value * 100)
    abs_tol, rel_tol = spec.abs_tol or 0.0, spec.rel_tol or 0.0
    for candidate in candidates:
        if math.isclose(candidate, target, rel_tol=rel_tol, abs_tol=abs_tol):
            return Grade(True, f"{candidate:g} is within tolerance of {target:g}")
    return Grade(False, f"{value:g} differs from {target:g} by more than "
                        f"abs_tol={abs_tol:g} / rel_tol={rel_tol:g}")


def _grade_set(truth: str, answer: str) -> Grade:
    expected, got = split_items(truth), split_items(answer)
    if expected == got:
        return Grade(True, f"all {len(expected)} items match")
    missing, extra = sorted(expected - got), sorted(got - expected)
    return Grade(False, f"missing {missing}, unexpected {extra}")


def _which_choice(choices: tuple[str, ...], answer: str) -> str | None:
    """The choice an answer names: equal to it, or led by it as a label (``B) ...``)."""
    said = normalise_text(answer)
    by_norm = {normalise_text(c): c for c in choices}
    if said in by_norm:
        return by_norm[said]
    led = [c for n, c in by_norm.items()
           if said.startswith(n) and not said[len(n):len(n) + 1].isalnum()]
    return max(led, key=len) if led else None


def _grade_choice(spec: GraderSpec, truth: str, answer: str) -> Grade:
    choices = tuple(spec.choices or ())
    named, expected = _which_choice(choices, answer), _which_choice(choices, truth)
    if named is None:
        return Grade(False, f"answer {answer[:80]!r} is not one of the choices {list(choices)}")
    ok = named == expected
    return Grade(ok, f"chose {named!r}" + ("" if ok else f"; expected {expected!r}"))


def _grade_regex(spec: GraderSpec, answer: str) -> Grade:
    pattern = re.compile(spec.pattern or "", re.I | re.S)
    for candidate in (answer.strip(), strip_wrapping(answer)):
        if pattern.fullmatch(candidate):
            return Grade(True, f"matches /{spec.pattern}/")
    return Grade(False, f"{answer[:80]!r} does not match /{spec.pattern}/")


def grade_against(spec: GraderSpec, truth: str, answer: str) -> Grade:
    """Grade ``answer`` against ``truth`` under ``spec``.

    Separate from `grade` so that task validation can ask whether a task's own answer
    satisfies its grader before any `Task` exists.

    Args:
        spec: The grader specification.
        truth: The ground-truth answer string.
        answer: The candidate answer (raw text after ``FINAL ANSWER:``).

    Returns:
        A `Grade`. An empty answer is incorrect (never unscorable): saying nothing is a
        model failure.

    Raises:
        GraderError: The kind is ``llm`` (a rule cannot apply a rubric: pass a judge
            to ``grade``), or a numeric ground truth is not a number.
    """
    if not strip_wrapping(answer):
        return Grade(False, "empty answer")
    if spec.kind == "exact":
        return _grade_exact(truth, answer)
    if spec.kind == "numeric":
        return _grade_numeric(spec, truth, answer)
    if spec.kind == "set":
        return _grade_set(truth, answer)
    if spec.kind == "choice":
        return _grade_choice(spec, truth, answer)
    if spec.kind == "regex":
        return _grade_regex(spec, answer)
    # A wrong verdict from a judge that does not exist would be a fake 0 reward.
    raise GraderError("llm grader not configured: no judge to apply the rubric")
