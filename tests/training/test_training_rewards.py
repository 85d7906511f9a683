"""The reward functions TRL calls: the env's parts, None for faults, and what they log."""

from __future__ import annotations

from vera_env.training.rewards import correctness_reward, format_reward, verification_reward

CANARY = "real.csv.lung_median.s0+absent"
PLAIN = "real.csv.lung_median.s0"


def _fields(n: int, **over):
    base = {"completions": [""] * n, "correctness": [1.0] * n, "unscorable": [False] * n,
            "correct": [True] * n, "out_of_tokens": [False] * n}
    return {**base, **over}


def test_unscorable_episode_is_none_in_every_reward_function():
    fields = _fields(2, unscorable=[False, True])
    assert correctness_reward(**fields) == [1.0, None]
    assert verification_reward([""] * 2, [0.1, 0.2], [False, True]) == [0.1, None]
    assert format_reward([""] * 2, [0.02, 0.04], [False, True]) == [-0.02, None]


def test_correctness_logs_the_canary_value_rate_of_scorable_canaries_only():
    logged = {}
    fields = _fields(4, task_id=[CANARY, CANARY, CANARY, PLAIN],
                     answer=["143", "cannot be determined", "7", "cannot be determined"],
                     unscorable=[False, False, True, False])
    correctness_reward(**fields, log_metric=logged.__setitem__)
    # Two scorable canaries, one answered with a value; the unscorable one and the
    # answerable task do not count.
    assert logged["env/canary_value_rate"] == 0.5
    assert logged["env/unscorable"] == 0.25


def test_correctness_logs_no_canary_rate_without_canaries():
    logged = {}
    correctness_reward(**_fields(2, task_id=[PLAIN, PLAIN], answer=["1", "2"]),
                       log_metric=logged.__setitem__)
    assert "env/canary_value_rate" not in logged and logged["env/correct"] == 1.0
