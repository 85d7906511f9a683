"""``vera_env.integrations.skyrl`` through the real skyrl-gym: registry, make, init, step."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.extras import require

require("skyrl_gym", "omegaconf", extra="skyrl")

import skyrl_gym  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from vera_env.integrations.skyrl import ENV_ID, VeraTextEnv, register  # noqa: E402
from vera_env.policy import OraclePolicy  # noqa: E402
from vera_env.spec import EnvSpec  # noqa: E402
from vera_env.tasks import load_tasks  # noqa: E402

TASK_ID = "seq.motif_count.easy.s0"
CONFIG = {"max_steps": 8}


def _in_process(task_id: str) -> tuple[float, list[str]]:
    """The oracle's return and observations in the plain env, the reference."""
    tasks = load_tasks("builtin")
    env = EnvSpec(**CONFIG).build(tasks=tasks)
    policy = OraclePolicy(tasks)
    obs, info = env.reset(options={"task_id": task_id})
    observations, total, done = [obs], 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
        total, done = total + reward, terminated or truncated
        observations.append(obs)
    env.close()
    return total, observations


def _make(extras: dict[str, object]) -> VeraTextEnv:
    register()
    env = skyrl_gym.make(ENV_ID, env_config=DictConfig(CONFIG), extras=extras)
    assert isinstance(env, VeraTextEnv)
    return env


def test_skyrl_oracle_episode_return_equals_in_process_env():
    expected, observations = _in_process(TASK_ID)
    env = _make({"extra_info": {"task_id": TASK_ID}, "max_turns": 8})
    messages, info = env.init([{"role": "user", "content": "the dataset's prompt"}])
    assert messages == [{"role": "user", "content": observations[0]}]
    assert info == {"task_id": TASK_ID}
    total, done, turn = 0.0, False, 0
    for turn, action in enumerate(load_tasks("builtin").get(TASK_ID).solution, start=1):
        out = env.step(action)
        assert isinstance(out["reward"], float) and out["metadata"]["unscorable"] is False
        total, done = total + out["reward"], out["done"]
        if not done:
            assert out["observations"] == [{"role": "user", "content": observations[turn]}]
    env.close()
    assert done and out["metadata"]["correct"] is True
    assert total == pytest.approx(expected) and expected > 1.0
    assert env.get_metrics() == {"vera_return": pytest.approx(expected), "unscorable": 0.0}


def test_skyrl_unscorable_step_flagged_in_metadata_and_metrics(judged_suite: Path):
    register()
    env = skyrl_gym.make(ENV_ID, env_config={"tasks": str(judged_suite),
                                                  "wrappers": []},
                         extras={"task_id": "judged"})
    env.init([])
    out = env.step("FINAL ANSWER: Escherichia coli")  # no judge configured: cannot be graded
    env.close()
    assert out["done"] is True and out["metadata"]["unscorable"] is True
    assert out["reward"] == 0.0 and out["observations"] == []
    assert env.get_metrics()["unscorable"] == 1.0


def test_skyrl_row_without_task_id_rejected():
    with pytest.raises(ValueError, match="names its task"):
        _make({"reward_spec": {"ground_truth": "4"}})


def test_skyrl_step_before_init_raises():
    env = _make({"task_id": TASK_ID})
    with pytest.raises(RuntimeError, match="init"):
        env.step("<command>ls</command>")


def test_skyrl_register_twice_keeps_one_entry():
    register()
    register()
    assert skyrl_gym.spec(ENV_ID).entry_point == "vera_env.integrations.skyrl:VeraTextEnv"
