"""How many confirmations bound what a check driven by entropy earns in an episode.

A check that reads the clock, a PID or ``/dev/urandom`` passes with some probability
``p`` on each run, whatever the data. To earn it must pass on the real workspace and on
each of the ``c`` controls, fail on a mutant, and fail again on ``r`` confirming runs
(each on a fresh file, or a fresh replay). So it earns with probability at most

    p^(1 + c) * (1 - p)^r,   largest at p = (1 + c) / (1 + c + r),

(each confirmation also re-runs a control, which must pass: that only lowers the
chance, and it is what stops checks on the time, which are not coins: a later run
sees a later clock, so ``strength.session`` makes a control run late too)

and the harness chooses ``r`` so that this largest value is within the check's share of
the episode's bound. Before, an unlucky node cost nothing and could be declared again
until it landed (12 episodes: 0.275 a episode, more than the reference). Now every
strength-tested node takes a rewarded slot, and the ``i``-th check tested in an episode
gets the share ``bound * 6 / (pi^2 * i^2)``: the shares sum to at most ``bound`` however
many checks are tested, so the chance that *any* entropy-driven check earns in an
episode is at most ``RewardConfig.strength_luck_bound`` — by design, not by the luck of
a draw. Address randomisation, the one source of entropy the sandbox can freeze, is off
inside it (a check reading stack addresses sees the same value on every run).

Example:
    >>> confirmations(controls=4, index=1, bound=0.05)    # the first check tested
    2
    >>> confirmations(controls=4, index=12, bound=0.05)   # the twelfth
    8
    >>> worst_case(controls=4, confirms=2) <= share(1, 0.05)
    True
"""

from __future__ import annotations

import math

__all__ = ["confirmations", "share", "worst_case"]

_MAX_CONFIRMS = 32


def worst_case(controls: int, confirms: int) -> float:
    """The largest chance, over ``p``, that a coin passes the real run and ``controls``
    controls and then fails ``confirms`` confirmations."""
    a, b = 1 + max(0, controls), max(0, confirms)
    if b == 0:
        return 1.0
    p = a / (a + b)
    return float(p ** a * (1 - p) ** b)


def share(index: int, bound: float) -> float:
    """The ``index``-th (1-based) tested check's share of the episode's bound."""
    return bound * 6 / (math.pi ** 2 * max(1, index) ** 2)


def confirmations(controls: int, index: int, bound: float) -> int | None:
    """The fewest confirming runs that keep the ``index``-th check within its share,
    or None when more than 32 would be needed (too few controls to bound luck with a
    sane number of runs: such a check earns nothing)."""
    target = share(index, bound)
    for r in range(1, _MAX_CONFIRMS + 1):
        if worst_case(controls, r) <= target:
            return r
    return None
