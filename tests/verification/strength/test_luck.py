"""The luck bound: confirmations keep what an entropy-driven check earns in an episode
within ``StrengthConfig.luck_bound``, however many checks are tested."""

from __future__ import annotations

import math
import random

import pytest

from vera_env.verification.strength.luck import confirmations, share, worst_case


def _earns(p: float, controls: int, draws: tuple[int, ...], r: int) -> float:
    """A tested coin's chance to earn as the session decides (written out, not from
    ``luck``): given it passed the real run (only such a check is tested), every control
    passes, each kind's draws agree with one kind at least rejected, then ``r`` times
    the mutant is rejected and the first control passes."""
    agree = math.prod(p ** d + (1 - p) ** d for d in draws) - p ** sum(draws) if draws else 1.0
    late = p if controls else 1.0
    return p ** controls * agree * ((1 - p) * late) ** r


def test_shares_over_any_number_of_checks_sum_to_at_most_the_bound():
    assert sum(share(i, 0.05) for i in range(1, 10_000)) <= 0.05


@pytest.mark.parametrize("draws", [(), (2,), (1, 2), (2, 2, 2, 2), (1, 1, 2, 2, 2, 2, 2, 2)])
@pytest.mark.parametrize("controls", [0, 1, 2, 4, 8])
def test_confirmations_keep_every_coin_within_its_share(controls, draws):
    for index in (1, 2, 5, 16, 64):
        r = confirmations(controls, index, 0.05, draws)
        if r is None:  # the check cannot earn at all
            assert controls <= 2
            continue
        assert r >= 1  # the late control and the fresh replay always run
        for p in (i / 2000 for i in range(1, 2000)):
            assert _earns(p, controls, draws, r) <= share(index, 0.05), (controls, index, p, r)


def test_the_fewest_confirmations_are_chosen():
    """One fewer would let some coin past its share (where more than one is asked)."""
    for draws in ((), (2, 2, 2, 2)):
        for index in (2, 5, 16, 64):
            r = confirmations(4, index, 0.05, draws)
            assert r is not None
            if r > 1:
                worst = max(_earns(i / 2000, 4, draws, r - 1) for i in range(1, 2000))
                assert worst > share(index, 0.05) / 1.01, (draws, index, r)


def test_worst_case_matches_the_largest_value_over_p():
    grid = max(_earns(i / 10_000, 4, (2, 2, 2), 3) for i in range(1, 10_000))
    assert math.isclose(worst_case(4, 3, (2, 2, 2)), grid, rel_tol=2e-2)
    assert worst_case(4, 3, (2, 2, 2)) >= grid  # the margin errs on the safe side


def test_counting_draws_and_the_late_control_asks_fewer_runs_of_a_group():
    """What the tighter bound buys: the confirmations of the first twelve checks tested,
    each shown four kinds of two draws: 24 instead of the 68 of a bound that counted
    neither (2 for the first check, 8 for the twelfth)."""
    tight = [confirmations(4, i, 0.05, (2, 2, 2, 2)) for i in range(1, 13)]
    assert sum(r for r in tight if r is not None) <= 30
    assert tight[0] == 1 and tight[-1] == 3


def test_confirmations_refused_when_too_few_controls_bound_nothing():
    assert confirmations(0, 64, 0.05) is None and confirmations(4, 64, 0.05) is not None


def test_confirmations_grow_with_the_number_of_checks_tested():
    counts = [confirmations(4, i, 0.05, (2, 2, 2, 2)) for i in (1, 4, 16, 64)]
    assert counts == sorted(counts) and counts[0] < counts[-1]


@pytest.mark.parametrize("draws", [(), (2, 2, 2, 2)])
def test_simulated_coin_episodes_stay_within_the_bound(draws):
    """64 coin checks an episode (4 slots x 16 checks), each at the pass probability
    that is worst for it, played as the session plays them: over 4,000 episodes the
    share in which any earned stays within the bound."""
    rng = random.Random(7)
    controls, bound, episodes, earned = 4, 0.05, 4_000, 0
    worst: dict[int, tuple[int, float]] = {}
    for i in range(1, 65):
        r = confirmations(controls, i, bound, draws)
        assert r is not None
        worst[i] = (r, max((j / 1000 for j in range(1, 1000)),
                           key=lambda p, r=r: _earns(p, controls, draws, r)))
    for _ in range(episodes):
        for i in range(1, 65):
            r, p = worst[i]

            def coin(p: float = p) -> bool:  # one toss: True is a pass
                return rng.random() < p
            if not all(coin() for _ in range(1 + controls)):
                continue
            kinds = [{coin() for _ in range(d)} for d in draws] or [{False}]
            if any(len(k) > 1 for k in kinds) or all(k == {True} for k in kinds):
                continue
            if all(not coin() and coin() for _ in range(r)):
                earned += 1
                break
    assert earned / episodes <= bound
