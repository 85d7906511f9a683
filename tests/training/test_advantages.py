"""Group-relative advantages, per-turn returns and sample weights (no torch needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vera_env.training.advantages import group_advantages, reward_to_go_advantages, sample_weights

NAN = float("nan")


def test_group_advantages_match_trl_and_leave_unscorable_out_of_the_baseline():
    torch = pytest.importorskip("torch")
    from trl.trainer.utils import nanstd

    rewards = [1.0, 0.0, NAN, 0.5, 0.2, 0.2, 0.2, 0.2]
    advantages, zero_std = group_advantages(rewards, 4)
    grouped = torch.tensor(rewards).view(-1, 4)
    expected = (grouped - torch.nanmean(grouped, 1, keepdim=True)) / (
        nanstd(grouped, dim=1, keepdim=True) + 1e-4)
    assert advantages == pytest.approx(torch.nan_to_num(expected).view(-1).tolist(), abs=1e-6)
    assert advantages[2] == 0.0  # unscorable: no advantage
    assert sum(advantages[:4]) == pytest.approx(0.0, abs=1e-9)  # baseline of the other three
    assert zero_std.tolist() == [False] * 4 + [True] * 4


def test_group_advantages_unscaled_and_all_unscorable_group_is_zero():
    advantages, zero_std = group_advantages([NAN, NAN, 1.0, 3.0], 2, scale="none")
    assert advantages.tolist() == [0.0, 0.0, -1.0, 1.0]
    assert zero_std.tolist() == [True, True, False, False]


def test_group_advantages_reject_partial_groups_and_unknown_scale():
    with pytest.raises(ValueError, match="not whole groups of 4"):
        group_advantages([1.0, 2.0, 3.0], 4)
    with pytest.raises(ValueError, match="scale must be"):
        group_advantages([1.0, 2.0], 2, scale="median")  # type: ignore[arg-type]


def test_reward_to_go_credits_a_turn_only_with_what_came_after_it():
    # Episode 0 verified at turn 0 and answered right at turn 2; episode 1 wasted turns.
    turns = [[0.1, 0.0, 1.0], [0.0, -0.02], [0.5], [0.0]]
    advantages = reward_to_go_advantages(turns, [True, True, False, True], 4, scale="none")
    returns = [1.1, 1.0, 1.0, -0.02, -0.02, 0.0]  # scorable turns of the group, pooled
    mean = sum(returns) / len(returns)
    assert advantages[0] == pytest.approx([1.1 - mean, 1.0 - mean, 1.0 - mean])
    assert advantages[1] == pytest.approx([-0.02 - mean, -0.02 - mean])
    assert advantages[2] == [0.0]  # unscorable
    assert advantages[0][0] > advantages[1][0]


def test_sample_weights_give_every_episode_the_same_total_with_mean_one():
    weights = sample_weights([3, 1, 0, 30])
    assert len(weights) == 34 and math.isclose(np.mean(weights), 1.0)
    totals = [sum(weights[:3]), weights[3], sum(weights[4:])]
    assert totals == pytest.approx([totals[0]] * 3)
    assert sample_weights([0, 0]) == []
