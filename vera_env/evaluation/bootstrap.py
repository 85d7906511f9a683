"""Bootstrap 95% confidence intervals of a mean and of a ratio of sums.

Why. A learning curve is read as "the policy got better": accuracy after 40 GRPO steps
against accuracy after SFT, on a held-out set of 60-odd instances. At that size a ten
point difference is within noise, so every point of the curve carries an interval, and
the claim "it learned" is made only when the intervals do not overlap. The
percentile bootstrap (Efron and Tibshirani 1993, ch. 13) is used because the columns
are bounded shares and means of rewards with skewed, lumpy distributions (most episodes
0, a few 1.2), where a normal interval runs outside [0, 1]. It is seeded, so the same
records give the same interval in every report.

A share over *units inside attempts* (nodes that are fingerprints, turns that were
rejected) is resampled by attempt, the unit that is independent (``ratio_ci``): turns
of one episode are not independent draws.

Example:
    >>> ci = mean_ci([0, 0, 1, 1, 1, 0, 1, 1], seed=0)
    >>> ci.lo <= ci.mean <= ci.hi, ci.n
    (True, 8)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["RESAMPLES", "Interval", "mean_ci", "ratio_ci"]

RESAMPLES = 2000
"""Bootstrap resamples per interval: enough for stable 2.5% and 97.5% percentiles."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A point estimate with its percentile bootstrap interval.

    ``mean`` is None (and so are ``lo`` and ``hi``) when there was nothing to estimate
    from; ``n`` counts the resampled units (attempts).
    """

    mean: float | None
    lo: float | None
    hi: float | None
    n: int

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-ready."""
        return {"mean": self.mean, "lo": self.lo, "hi": self.hi, "n": self.n}


def _check(resamples: int, level: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")


def _bounds(stats: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    return float(lo), float(hi)


def mean_ci(values: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0,
            level: float = 0.95) -> Interval:
    """The mean of ``values`` and its percentile bootstrap interval.

    Args:
        values: One value per independent unit (an attempt's correctness as 0/1, its
            verification reward, ...).
        resamples: Bootstrap resamples.
        seed: Seed of the resampling.
        level: Coverage of the interval.

    Raises:
        ValueError: ``resamples`` < 1 or ``level`` outside (0, 1).
    """
    _check(resamples, level)
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Interval(None, None, None, 0)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, data.size, size=(resamples, data.size))
    lo, hi = _bounds(data[picks].mean(axis=1), level)
    mean = float(data.mean())
    return Interval(mean, min(lo, mean), max(hi, mean), int(data.size))


def ratio_ci(numerators: Sequence[float], denominators: Sequence[float], *,
             resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95) -> Interval:
    """sum(numerators) / sum(denominators), resampling the units (pairs) together.

    ``n`` counts the units with a positive denominator (attempts that had a turn, a
    node, a canary); a resample whose denominators sum to zero is dropped. The estimate
    is None when every denominator is zero.

    Raises:
        ValueError: The sequences differ in length, or as ``mean_ci``.
    """
    _check(resamples, level)
    if len(numerators) != len(denominators):
        raise ValueError(f"{len(numerators)} numerators for {len(denominators)} denominators")
    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    counted = int((den > 0).sum())
    if den.sum() <= 0:
        return Interval(None, None, None, counted)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, den.size, size=(resamples, den.size))
    sums_num, sums_den = num[picks].sum(axis=1), den[picks].sum(axis=1)
    kept = sums_den > 0
    lo, hi = _bounds(sums_num[kept] / sums_den[kept], level)
    ratio = float(num.sum() / den.sum())
    return Interval(ratio, min(lo, ratio), max(hi, ratio), counted)
