"""Bootstrap intervals: bounds hold the estimate, shrink with data, and are reproducible."""

from __future__ import annotations

import pytest

from vera_env.evaluation.bootstrap import mean_ci, ratio_ci


def test_mean_ci_bounds_hold_the_mean_and_are_seeded():
    values = [0, 1, 1, 0, 1, 0, 0, 1, 1, 1]
    ci = mean_ci(values, seed=3)
    assert ci.lo is not None and ci.hi is not None
    assert ci.mean == pytest.approx(0.6)
    assert 0.2 < ci.lo < ci.mean < ci.hi <= 1.0
    assert mean_ci(values, seed=3) == ci
    assert ci.n == 10


def test_mean_ci_more_data_narrower_interval():
    small = mean_ci([0, 1] * 10, seed=0)
    large = mean_ci([0, 1] * 200, seed=0)
    assert (large.hi - large.lo) < (small.hi - small.lo) / 2


def test_mean_ci_constant_values_interval_is_the_point():
    ci = mean_ci([0.25] * 7)
    assert (ci.lo, ci.mean, ci.hi) == (0.25, 0.25, 0.25)


def test_mean_ci_empty_is_none():
    assert mean_ci([]).to_dict() == {"mean": None, "lo": None, "hi": None, "n": 0}


def test_ratio_ci_is_ratio_of_sums_resampled_by_unit():
    ci = ratio_ci([1, 0, 3, 2], [2, 0, 4, 2], seed=1)
    assert ci.mean == pytest.approx(6 / 8)
    assert ci.lo <= ci.mean <= ci.hi
    assert ci.n == 3  # the unit with nothing to count is not counted


def test_ratio_ci_all_denominators_zero_is_none():
    ci = ratio_ci([0, 0], [0, 0])
    assert (ci.mean, ci.n) == (None, 0)


@pytest.mark.parametrize(("kwargs", "match"), [({"resamples": 0}, "resamples"),
                                               ({"level": 1.0}, "level")])
def test_mean_ci_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mean_ci([1.0], **kwargs)


def test_ratio_ci_length_mismatch_raises():
    with pytest.raises(ValueError, match="numerators"):
        ratio_ci([1], [1, 2])
