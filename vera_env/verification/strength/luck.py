"""How many confirmations bound what a check driven by entropy earns in an episode.

A check that reads the clock, a PID or ``/dev/urandom`` passes with some probability
``p`` on each run, whatever the data. To earn it must

* pass on each of the ``c`` controls it is shown: ``p^c`` (the real workspace is
  given, not counted: only a check that passed there is tested, so the bound is on what
  a tested check earns -- and a pin gated on the task's own value passes there by
  design);
* give one verdict on every draw of each kind of mutation it is shown, and reject at
  least one kind (``StrengthSession`` refuses a check that holds on one draw of a kind
  and rejects another): with ``d_k`` draws of kind ``k``, probability
  ``prod_k (p^d_k + (1 - p)^d_k) - prod_k p^d_k``;
* then, ``r`` times, reject a reserve draw of a killed kind (one it was never shown:
  ``mutants.RESERVE`` per kind, the killed kinds' in turn; the killed mutant again once
  none is left) *and* pass a reserve control (a further draw of a control it was never
  shown, chosen for the fingerprints it moves: ``variants.Classified.control_reserves``;
  the first control again once none is left), a later run, which is what stops checks
  on the time (not coins: a later run sees a later clock): ``((1 - p) p)^r``.

That is the coin *per run* (``Tosses`` with every variant a toss). A check that is a
function of what it reads is a coin only over the values it reads: a pin gated on a
hash of the records' digit count passes every variant with the file's own count for
free, gives variants sharing a count one verdict, and wins a confirmation whose reserve
repeats a count it has seen for free. So the session also holds a check to a gate on
each catalogued fingerprint its verdicts fit (``fingerprints``), each counted over the
distinct values the variants gave it (``Tosses``: the forced passes, the groups that
passed or failed whole, the confirmations that toss), and asks for the confirmations
that bound the worst of them (``needed``); where the planned ones cannot (reserves run
out, or repeat the values it has seen), the check earns nothing.

The harness takes the largest value of that product over ``p`` and chooses the fewest
``r >= 1`` that keep it within the check's share of the episode's bound (one
confirmation at least, whatever the arithmetic: the late control and the fresh replay
are what catch clock checks and replays that do not repeat). Before, an unlucky node
cost nothing and could be declared again until it landed (12 episodes: 0.275 an
episode, more than the reference). Now every strength-tested node takes a rewarded
slot, and the ``i``-th check tested in an episode gets the share
``bound * 6 / (pi^2 * i^2)``: the shares sum to at most ``bound`` however many checks
are tested, so the chance that *any* entropy-driven check earns in an episode is at
most ``StrengthConfig.luck_bound`` -- by design, not by the luck of a draw.
Address randomisation, the one source of entropy the sandbox can freeze, is off inside
it (a check reading stack addresses sees the same value on every run).

Why the draws and the late control are counted. The first version bounded
``p^(1 + c) (1 - p)^r`` only: it ignored that a coin must also agree with itself on
every draw of a kind and pass the re-run control, so it asked for 2-10 confirmations a
kill (8 for the twelfth check tested), each two sandbox runs that a verdict store can
never serve. A GRPO group's later episodes were served everything else, so these runs
were most of what a group paid for (720 of 1,584 runs for 8 oracle episodes of one
task, ``benchmarks/strength_share.py``). Counting what the session already demands
keeps the same bound with about a third of them.

A served verdict (``verdicts``) changes nothing here: a verdict is served only after two
runs agreed on it and none ever disagreed, which a coin satisfies less often than it
passes once, and confirmations are never served.

Example:
    >>> confirmations(controls=4, index=1, bound=0.05)    # the first check tested
    2
    >>> confirmations(controls=4, index=12, bound=0.05, draws=(2, 2, 2, 2))
    3
    >>> confirmations(controls=4, index=12, bound=0.05)   # draws unknown: none counted
    5
    >>> worst_case(controls=4, confirms=2) <= share(1, 0.05)
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = ["Tosses", "confirmations", "log_chance", "needed", "share", "worst_case"]

_MAX_CONFIRMS = 32
_GRID = np.linspace(1e-6, 1 - 1e-6, 20_001)


@dataclass(frozen=True, slots=True)
class Tosses:
    """What a coin must win to earn, under one hypothesis of what it is a coin over.

    The first hypothesis is a coin per *run* (the clock, ``/dev/urandom``): every
    control, every draw and every confirmation is a toss. The others are a gate on one
    fingerprint of the file (``fingerprints``): a pin of the record count, say, True on
    the file's own count, True or False by a hash of any other count. Then only a
    variant with a *new* value is a toss, and variants sharing a value share one.

    Attributes:
        forced: Values the coin had to pass: the shown controls' (besides the file's own)
            and any draw's that shares one, or whose kind shares one with a control.
        groups: The other values, in groups that had to share one verdict (the draws
            of one kind, linked through the values they share): each group passed
            whole or rejected whole, and one group at least was rejected.
        confirms: Per confirmation, in the order they run: (the reserve mutant is a
            toss, the reserve control is a toss).
        name: What it is a coin over, as a weak check's detail says it.
    """

    forced: int
    groups: tuple[int, ...]
    confirms: tuple[tuple[bool, bool], ...]
    name: str = "a coin per run"


def log_chance(tosses: Tosses, r: int) -> float:
    """``log`` of the largest chance, over the coin's ``p``, that it passes the forced
    values, agrees within each group rejecting one at least, and then wins the first
    ``r`` confirmations (rejects each tossing reserve mutant, passes each tossing
    reserve control); with the same 1% margin as ``worst_case``."""
    return float(_curve(tosses.forced, tuple(sorted(tosses.groups)), tosses.confirms[:r],
                        r)[-1])


def needed(hypotheses: Sequence[Tosses], index: int, bound: float) -> int | None:
    """The fewest confirmations (at least one) after which no hypothesis's coin earns
    more than the ``index``-th tested check's share, or None when the planned ones
    (each hypothesis's ``confirms``, all the same length) are not enough."""
    target = math.log(share(index, bound))
    planned = min((len(t.confirms) for t in hypotheses), default=0)
    if planned < 1:
        return None
    shapes = {(t.forced, tuple(sorted(t.groups)), t.confirms[:planned]) for t in hypotheses}
    worst = np.max([_curve(*shape) for shape in shapes], axis=0)  # fingerprints share shapes
    met = np.nonzero(worst[1:] <= target)[0]
    return int(met[0]) + 1 if met.size else None


@lru_cache(maxsize=4096)
def _curve(forced: int, groups: tuple[int, ...], confirms: tuple[tuple[bool, bool], ...],
           upto: int | None = None) -> np.ndarray:
    """``log`` of the largest chance over ``p`` after ``r = 0 .. len(confirms)`` (or
    ``upto``, the last repeated) confirmations, with a 1% margin for what falls between
    grid points; cached by shape (a session asks the same few shapes again and again),
    so read-only."""
    upto = len(confirms) if upto is None else upto
    p = _GRID
    if groups:
        agree = np.prod([p ** u + (1 - p) ** u for u in groups], axis=0)
        log = forced * np.log(p) + np.log(np.maximum(agree - p ** sum(groups), 1e-300))
    else:  # nothing it could reject: no coin over these values earns
        log = np.full_like(p, -math.inf)
    out = [float(np.max(log))]
    for mutant, control in confirms[:upto]:
        log = log + (np.log1p(-p) if mutant else 0.0) + (np.log(p) if control else 0.0)
        out.append(float(np.max(log)))
    out += [out[-1]] * (upto + 1 - len(out))
    curve = np.asarray(out) + math.log(1.01)
    curve.flags.writeable = False
    return curve


def worst_case(controls: int, confirms: int, draws: Sequence[int] = (),
               late_control: bool = True) -> float:
    """The largest chance, over ``p``, that a coin earns: passes the real run and
    ``controls`` controls, agrees with itself on every draw of each kind (``draws``:
    the draws per kind it was shown; none counted when empty) rejecting one kind at
    least, then rejects a reserve mutant ``confirms`` times, passing a reserve control
    each time (``late_control``; only where there are controls)."""
    return float(np.exp(_runs(controls, tuple(sorted(draws)),
                              late_control and controls > 0)[max(0, confirms)]))


def share(index: int, bound: float) -> float:
    """The ``index``-th (1-based) tested check's share of the episode's bound."""
    return bound * 6 / (math.pi ** 2 * max(1, index) ** 2)


def confirmations(controls: int, index: int, bound: float,
                  draws: Sequence[int] = ()) -> int | None:
    """The fewest confirming runs (at least one) that keep the ``index``-th check within
    its share, or None when more than 32 would be needed (too few controls to bound luck
    with a sane number of runs: such a check earns nothing).

    Args:
        controls: Controls the check passed (each confirmation runs a reserve one).
        index: Which check tested in the episode this is (1-based).
        bound: ``StrengthConfig.luck_bound``.
        draws: Mutants it was shown per kind of mutation (empty: not counted).
    """
    chances = _runs(controls, tuple(sorted(draws)), controls > 0)
    target = math.log(share(index, bound))
    for r in range(1, _MAX_CONFIRMS + 1):
        if chances[r] <= target:
            return r
    return None


def _runs(controls: int, draws: tuple[int, ...], late: bool) -> np.ndarray:
    """The coin per run's ``_curve`` for ``r = 0 .. _MAX_CONFIRMS`` (draws unknown, empty:
    one group of no values, whose agreement is 1)."""
    return _curve(max(0, controls), draws or (0,), ((True, late),) * _MAX_CONFIRMS)
