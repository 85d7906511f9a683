"""TRL's own ORS consumer (``trl.experimental.openreward``, over the ``openreward`` SDK)
against ``vera-env serve --protocol ors``: the README recipe, run as written.

TRL builds the dataset from the server's task list, one environment per rollout from
``environment_factory`` (our ``turn`` tool bound as a method), and scores a rollout with
the last non-null reward. So the reward TRL trains on is the env's episode return, and
an unscorable episode reaches TRL as ``None`` (no advantage), never as 0.

Found by running it: the ``openreward`` client opens sessions at ``sessions.<host>`` (its
hosted platform's routing), so against a self-hosted server every session failed with
"Cannot connect to host sessions.127.0.0.1"; ``OPENREWARD_SESSION_URL`` set to the
server's own address is the fix the README recipe now gives.
"""

from __future__ import annotations

import os

import pytest
from extras import require
from serve_helpers import NODE, running

from vera_env.serve import ServeConfig, create_app
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks

require("trl", "openreward", extra="dev")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from trl.experimental.openreward import OpenRewardSpec  # noqa: E402 (after the requirement)

BUILTIN = load_tasks("builtin")


def _server(spec: EnvSpec) -> object:
    return create_app(spec, config=ServeConfig(protocol="ors"))


@pytest.fixture(autouse=True)
def _own_host(monkeypatch):
    def point(url: str) -> str:
        monkeypatch.setenv("OPENREWARD_SESSION_URL", url)
        return url
    return point


def test_trl_openreward_spec_trains_on_the_episode_return_of_builtin_tasks(_own_host):
    app = _server(EnvSpec(max_steps=12))
    with running(app) as url:
        spec = OpenRewardSpec(_own_host(url), env_name="vera", num_tasks=2)
        rows = spec.train_dataset
        assert rows["task_index"] == [0, 1] and len(set(rows["task_id"])) == 2
        env = spec.environment_factory()
        assert callable(env.turn)  # the server's tool, bound by TRL for tool calling
        task = BUILTIN.get(rows["task_id"][1])
        prompt = env.reset(task_index=1)
        assert task.question in prompt
        outputs = [env.turn(text=t) for t in task.solution]
        env._close()
    assert env.finished and len(env.rewards) == len(task.solution)
    assert env.rewards[:-1] == [None] * (len(task.solution) - 1)
    assert env.reward is not None and env.reward > 1.0  # correct, plus verified nodes
    assert spec.reward_funcs([env]) == [env.reward]
    assert all(isinstance(o, str) and o for o in outputs)  # each turn's observation


def test_trl_openreward_unscorable_episode_is_none_not_zero(suite, _own_host):
    app = _server(EnvSpec(tasks=str(suite), max_steps=6))
    with running(app) as url:
        spec = OpenRewardSpec(_own_host(url), env_name="vera")
        index = spec.train_dataset["task_id"].index("drinks-judged")  # no judge is served
        env = spec.environment_factory()
        env.reset(task_index=index)
        env.turn(text=NODE)
        env.turn(text="FINAL ANSWER: 5.0")
        env._close()
    assert env.finished and env.reward is None
    assert spec.reward_funcs([env]) == [None]
    assert env.metadata[-1]["unscorable"] is True


def test_trl_openreward_wrong_answer_scores_only_its_verified_node(suite, _own_host):
    app = _server(EnvSpec(tasks=str(suite), max_steps=6))
    with running(app) as url:
        spec = OpenRewardSpec(_own_host(url), env_name="vera")
        index = spec.train_dataset["task_id"].index("drinks-mean")
        env = spec.environment_factory()
        env.reset(task_index=index)
        env.turn(text=NODE)
        env.turn(text="FINAL ANSWER: 4.0")
        env._close()
    last = env.metadata[-1]
    assert env.finished and last["correct"] is False
    assert env.reward == pytest.approx(last["verification_total"]) and 0 < env.reward < 1.0


def test_trl_openreward_reaches_a_token_protected_server_through_its_api_key(
        monkeypatch, _own_host):
    app = create_app(EnvSpec(max_steps=12), config=ServeConfig(protocol="ors", token="s3cret"))
    with running(app) as url:
        monkeypatch.setenv("OPENREWARD_API_KEY", "s3cret")  # sent as X-API-Key
        spec = OpenRewardSpec(_own_host(url), env_name="vera", num_tasks=1)
        env = spec.environment_factory()
        task = BUILTIN.get(spec.train_dataset["task_id"][0])
        assert task.question in env.reset(task_index=0)
        env._close()
        monkeypatch.setenv("OPENREWARD_API_KEY", "wrong")
        with pytest.raises(Exception, match="missing or wrong bearer token"):
            _ = OpenRewardSpec(url, env_name="vera", num_tasks=1).train_dataset
