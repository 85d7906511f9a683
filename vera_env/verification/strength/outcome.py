"""What testing one check against one task file's variants found: a tagged outcome.

The earlier code said "unfinished", "deadline" or a reason in bare strings, and
returned ``Target | str`` and ``ShadowGroup | str``: a caller could mistake a reason for
a result. Here every outcome is one frozen record of a closed set of kinds, and running
out of time is one exception, ``StrengthDeadline``, raised wherever harness work
notices the step's deadline has passed and caught once per check: what is undecided
earns nothing, with a detail that says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from vera_env.errors import StrengthDeadline

__all__ = ["Outcome", "OutcomeKind", "StrengthDeadline", "TimeLeft"]

TimeLeft = Callable[[], float]
"""Seconds the step's harness work may still take; 0 or less once its deadline has
passed, where the work raises ``StrengthDeadline``."""

OutcomeKind = Literal["kill", "weak", "survived", "skipped"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict of one check on one task file's variants.

    Attributes:
        kind: ``kill`` (passed every control, failed a mutant, confirmed), ``weak``
            (decided: it does not follow the answer — ``why`` says how), ``survived``
            (passed every mutant: it does not depend on this file), ``skipped`` (this
            file could not be varied). Running out of time is no kind: it is
            ``StrengthDeadline``, raised.
        why: The reason, for ``weak`` and ``skipped``.
        kills: For ``kill``: the mutants it failed on.
        evidence: For ``kill``: its verdicts over every mutant of the file, as one
            string (``F`` failed, ``T`` passed, ``?`` no clean verdict). Two checks with
            the same evidence on the same file are one piece of evidence.
        tried: For ``survived``: how many mutants it passed.
    """

    kind: OutcomeKind
    why: str = ""
    kills: tuple[str, ...] = ()
    evidence: str = ""
    tried: int = 0
