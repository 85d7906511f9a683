"""The luck bound: confirmations keep what an entropy-driven check earns in an episode
within ``strength_luck_bound``, however many checks are tested."""

from __future__ import annotations

import math
import random

import pytest

from vera_env.verification.strength.luck import confirmations, share, worst_case


def test_shares_over_any_number_of_checks_sum_to_at_most_the_bound():
    assert sum(share(i, 0.05) for i in range(1, 10_000)) <= 0.05


@pytest.mark.parametrize("controls", [0, 1, 2, 4, 8])
def test_confirmations_keep_every_coin_within_its_share(controls):
    for index in (1, 2, 5, 16, 64):
        r = confirmations(controls, index, 0.05)
        if r is None:  # the check cannot earn at all
            assert controls <= 2
            continue
        for p in (i / 200 for i in range(1, 200)):
            earns = p ** (1 + controls) * (1 - p) ** r
            assert earns <= share(index, 0.05) * (1 + 1e-9), (controls, index, p, r)


def test_worst_case_matches_the_largest_value_over_p():
    a, r = 5, 3
    grid = max(p ** a * (1 - p) ** r for p in (i / 10_000 for i in range(1, 10_000)))
    assert math.isclose(worst_case(4, 3), grid, rel_tol=1e-3)


def test_confirmations_refused_when_too_few_controls_bound_nothing():
    assert confirmations(0, 64, 0.05) is None and confirmations(4, 64, 0.05) is not None


def test_confirmations_grow_with_the_number_of_checks_tested():
    counts = [confirmations(4, i, 0.05) for i in (1, 4, 16, 64)]
    assert counts == sorted(counts) and counts[0] < counts[-1]


def test_simulated_coin_episodes_stay_within_the_bound():
    """64 coin checks an episode (4 slots x 16 checks), each at the pass probability
    that is worst for it: over 4,000 episodes the share in which any earned stays
    within the bound."""
    rng = random.Random(7)
    controls, bound, episodes, earned = 4, 0.05, 4_000, 0
    for _ in range(episodes):
        for i in range(1, 65):
            r = confirmations(controls, i, bound)
            p = (1 + controls) / (1 + controls + r)
            passes = all(rng.random() < p for _ in range(1 + controls))
            if passes and all(rng.random() >= p for _ in range(r)):
                earned += 1
                break
    assert earned / episodes <= bound
