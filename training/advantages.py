"""Group-relative advantages of step-wise samples, and how much each sample weighs.

Three decisions, each with its reason:

* **Advantages are computed per episode and broadcast to its turns.** A group is
  ``num_generations`` episodes of one task instance and seed (TRL repeats each dataset
  row that many times); its members' episode rewards are normalised as TRL normalises
  single-turn completions (``scale_rewards``: by the group's std, the batch's, or not),
  and every turn of an episode gets the episode's advantage — what SkyRL's step-wise
  training and rLLM's step-wise advantage broadcast do, and for GRPO the same estimate
  as the concatenated layout's. Option ``reward_to_go``: turn ``t`` gets the return
  from ``t`` on (the sum of that and later steps' rewards), normalised over all turn
  samples of its group — the per-turn credit of the Kevin paper's multi-turn GRPO —
  so a turn is not credited for verification earned before it.
* **Unscorable episodes get no gradient and no share of the baseline.** Their reward
  is NaN here: left out of their group's mean and std, given no sample at all.
* **Long episodes do not dominate by sample count.** Each sample weighs
  ``1 / n_turns`` of its episode, rescaled so the mean weight over the batch is 1: every
  episode carries the same total weight whether it took 3 turns or 30 (SkyRL notes the
  opposite effect of unweighted step-wise samples: an episode of T turns counts T
  times). The weight multiplies the advantage, which scales a clipped surrogate exactly
  (``min(r·wA, clip(r)·wA) = w·min(r·A, clip(r)·A)`` for ``w > 0``); within a turn the
  trainer's ``loss_type`` decides how tokens are averaged. A KL term (``beta > 0``) is
  not weighted.

Pure numpy, so it is tested without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["AdvantageMode", "ScaleRewards", "group_advantages", "reward_to_go_advantages",
           "sample_weights", "weighted_rewards"]

AdvantageMode = Literal["episode", "reward_to_go"]
ScaleRewards = Literal["group", "batch", "none"]
_EPS = 1e-4  # as TRL


def _nanstd(values: np.ndarray) -> float:
    """Unbiased std over the non-NaN values (NaN with fewer than two), as TRL's ``nanstd``."""
    kept = values[~np.isnan(values)]
    return float(np.std(kept, ddof=1)) if kept.size > 1 else float("nan")


def weighted_rewards(per_func: Sequence[Sequence[float]] | np.ndarray,
                     weights: Sequence[float]) -> np.ndarray:
    """Each episode's reward: its reward functions' values, weighted and summed.

    A NaN value (a function that abstained) adds nothing; an episode on which every
    function abstained (unscorable) gets NaN, so ``group_advantages`` leaves it out.
    With weights ``(1, 0, 1)`` over ``vera_env.training.rewards.REWARD_FUNCS``
    (verification, correctness, format) correctness adds nothing, so a group that
    differs only in correctness has no advantage.

    Example:
        >>> weighted_rewards([[0.5, 1.0, -0.1], [0.5, 0.0, -0.1]], (1, 0, 1)).tolist()
        [0.4, 0.4]
    """
    values = np.asarray(per_func, dtype=np.float64).reshape(-1, len(weights))
    out: np.ndarray = np.nansum(values * np.asarray(weights, dtype=np.float64), axis=1)
    out[np.isnan(values).all(axis=1)] = np.nan
    return out


def group_advantages(rewards: Sequence[float], num_generations: int,
                     scale: ScaleRewards = "group") -> tuple[np.ndarray, np.ndarray]:
    """Group-relative advantages of episodes (NaN reward: unscorable).

    Args:
        rewards: One reward per episode, groups of ``num_generations`` consecutive.
        num_generations: Group size.
        scale: Divide by the group's std (``group``), the batch's (``batch``) or not.

    Returns:
        ``(advantages, zero_std)``: unscorable episodes get 0; ``zero_std`` marks
        episodes whose group's scorable rewards are all equal (no signal).

    Raises:
        ValueError: ``rewards`` is not a whole number of groups, or an unknown scale.
    """
    values = np.asarray(rewards, dtype=np.float64)
    if num_generations < 1 or values.size % num_generations:
        raise ValueError(f"{values.size} rewards are not whole groups of {num_generations}")
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be group, batch or none, got {scale!r}")
    groups = values.reshape(-1, num_generations)
    with np.errstate(all="ignore"):
        means = np.array([np.nanmean(g) if not np.isnan(g).all() else np.nan for g in groups])
        stds = np.array([_nanstd(g) for g in groups])
        advantages = groups - means[:, None]
        if scale == "group":
            advantages = advantages / (stds[:, None] + _EPS)
        elif scale == "batch":
            advantages = advantages / (_nanstd(values) + _EPS)
    zero_std = np.repeat(np.isclose(np.nan_to_num(stds, nan=0.0), 0.0), num_generations)
    return np.nan_to_num(advantages.reshape(-1), nan=0.0), zero_std


def reward_to_go_advantages(turn_rewards: Sequence[Sequence[float]], scorable: Sequence[bool],
                            num_generations: int, scale: ScaleRewards = "group"
                            ) -> list[list[float]]:
    """Per-turn advantages from returns-to-go, normalised over each group's turn samples.

    Args:
        turn_rewards: Per episode, the reward of each of its turns.
        scorable: Per episode, whether it may be trained on (unscorable: all zeros).
        num_generations: Group size (consecutive episodes).
        scale: As ``group_advantages`` (``batch`` normalises over every scorable turn).

    Returns:
        Per episode, one advantage per turn.
    """
    returns = [np.cumsum(np.asarray(r, dtype=np.float64)[::-1])[::-1] for r in turn_rewards]
    out: list[list[float]] = [[0.0] * len(r) for r in turn_rewards]
    every = np.concatenate([r for r, ok in zip(returns, scorable, strict=False) if ok] or [np.zeros(0)])
    for start in range(0, len(returns), num_generations):
        members = [i for i in range(start, start + num_generations) if scorable[i]]
        pooled = np.concatenate([returns[i] for i in members] or [np.zeros(0)])
        if pooled.size == 0:
            continue
        spread = {"group": _nanstd(pooled), "batch": _nanstd(every), "none": 0.0}[scale]
        divisor = 1.0 if scale == "none" else np.nan_to_num(spread, nan=0.0) + _EPS
        for i in members:
            out[i] = [float(x) for x in (returns[i] - pooled.mean()) / divisor]
    return out


def sample_weights(n_turns: Sequence[int]) -> list[float]:
    """``1 / n_turns`` per sample, scaled to mean 1 over the samples (episode-major).

    Episodes with no turn contribute nothing. Each episode's weights sum to the same
    total.
    """
    kept = [n for n in n_turns if n > 0]
    if not kept:
        return []
    scale = sum(kept) / len(kept)
    return [scale / n for n in kept for _ in range(n)]
