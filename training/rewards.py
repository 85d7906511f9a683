"""Reward functions for TRL: the environment's measurement, never the decoded text.

``vera_env.training.scripts.grpo`` hands these to ``GRPOTrainer`` in both layouts. Each reads the env's
reward parts from fields the rollout returns, one value per episode; their sum is the
env's episode reward (weigh them with ``GRPOConfig.reward_weights``). An infrastructure
fault (sandbox, or a grader that cannot decide) makes every one of them return
``None``: TRL then gives that episode zero advantage and leaves it out of its group's
baseline, where a fake 0 would reward or punish the model for an outage.

``correctness_reward`` also logs what the trainer should watch besides the reward
(``log_metric``): ``env/correct``, ``env/out_of_tokens``, ``env/unscorable`` and, when
the batch holds canary tasks (``vera_env.tasks.canary``: questions the data cannot
answer), ``env/canary_value_rate`` — the share of them answered with a value, the sign
of a policy that has learned to guess.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vera_env.tasks.canary import canary_rate

__all__ = ["DEFAULT_WEIGHTS", "REWARD_FUNCS", "RewardWeights", "check_reward_weights",
           "correctness_reward", "format_reward", "verification_reward"]


def verification_reward(completions: list[Any], verification: list[float],
                        unscorable: list[bool], **_: Any) -> list[float | None]:
    """Harness-executed verification reward of each episode (None if unscorable)."""
    return [None if bad else value for value, bad in zip(verification, unscorable, strict=True)]


def correctness_reward(completions: list[Any], correctness: list[float | None],
                       unscorable: list[bool], correct: list[bool | None],
                       out_of_tokens: list[bool], log_metric: Callable[[str, float], None] | None = None,
                       task_id: list[str] | None = None, answer: list[str] | None = None,
                       **_: Any) -> list[float | None]:
    """Correctness reward (0 when no answer was released; None if unscorable)."""
    scorable = [i for i, bad in enumerate(unscorable) if not bad]
    if log_metric is not None and scorable:
        log_metric("env/correct", float(np.mean([correct[i] is True for i in scorable])))
        log_metric("env/out_of_tokens", float(np.mean([out_of_tokens[i] for i in scorable])))
        log_metric("env/unscorable", 1.0 - len(scorable) / len(unscorable))
        if task_id is not None and answer is not None:
            rate, n = canary_rate({"task_id": task_id[i], "answer": answer[i]} for i in scorable)
            if n and rate is not None:
                log_metric("env/canary_value_rate", rate)
    return [None if bad else (value or 0.0)
            for value, bad in zip(correctness, unscorable, strict=True)]


def format_reward(completions: list[Any], format_penalty: list[float], unscorable: list[bool],
                  **_: Any) -> list[float | None]:
    """Minus the format penalties of rejected turns (None if unscorable)."""
    return [None if bad else -value for value, bad in zip(format_penalty, unscorable, strict=True)]


REWARD_FUNCS = [verification_reward, correctness_reward, format_reward]
"""Their sum is the env's episode reward; weigh them with ``GRPOConfig.reward_weights``."""

RewardWeights = tuple[float, float, float]
"""Weights of ``REWARD_FUNCS``, in their order: verification, correctness, format."""
DEFAULT_WEIGHTS: RewardWeights = (1.0, 1.0, 1.0)
"""The env's own reward: the three parts summed."""


def check_reward_weights(weights: tuple[float, ...]) -> RewardWeights:
    """``weights`` as ``RewardWeights``, refused unless they are three, none negative and
    not all zero.

    A negative weight would reward what the env penalises (format) or punish what it
    pays; all zero leaves no reward, every group without advantage.

    Raises:
        ValueError: Not three weights, a negative one, or all zero (says which).
    """
    if len(weights) != len(REWARD_FUNCS):
        raise ValueError(f"--reward-weights takes 3 weights (verification, correctness, "
                         f"format), got {len(weights)}: {list(weights)}")
    if any(not w >= 0 for w in weights):  # NaN fails too
        raise ValueError(f"--reward-weights must be >= 0, got {list(weights)}")
    if not any(weights):
        raise ValueError("--reward-weights are all zero: no reward, no advantage")
    return (float(weights[0]), float(weights[1]), float(weights[2]))
