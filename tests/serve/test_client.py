"""VeraRemoteEnv: the local env's behaviour, over a real server on 127.0.0.1."""

from __future__ import annotations

import inspect
import math
import subprocess
import sys
import time
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from serve_helpers import NODE, eventually, running

import vera_env
from vera_env import info as keys
from vera_env.errors import ResetNeeded, SandboxError
from vera_env.policies import OraclePolicy
from vera_env.rollout import run_episode
from vera_env.rollout.vector import EnvInfo, close_vector_env, play_vector
from vera_env.serve import RemoteEnvError, ServeConfig, VeraRemoteEnv, create_app
from vera_env.serve.client import _translate
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks
from vera_env.tasks.source import UnknownTaskError
from vera_env.verification.rewards import RewardConfig

BUILTIN = load_tasks("builtin")
NO_STRENGTH = RewardConfig(strength=False)


def timeless(value):
    """``value`` without its timings (``wall_s``, ``duration_s``), at any depth."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k not in ("wall_s", "duration_s")}
    if isinstance(value, (list, tuple)):
        return [timeless(v) for v in value]
    return value


def comparable(attempt) -> dict:
    """The Attempt without its timings."""
    return timeless(attempt.to_dict())


def test_remote_episodes_are_the_local_episodes(suite):
    for tasks, ids in ((BUILTIN, BUILTIN.ids()[:2]), (load_tasks(suite), ["drinks-mean"])):
        spec = EnvSpec(tasks=tasks.name if tasks is not BUILTIN else "builtin", max_steps=8)
        policy = OraclePolicy(tasks)
        local = spec.build(tasks=tasks)
        with running(create_app(spec)) as url:
            remote = VeraRemoteEnv(url)
            for task_id in ids:
                there = run_episode(remote, policy, task_id=task_id, seed=1)
                here = run_episode(local, policy, task_id=task_id, seed=1)
                assert there.status == "ok" and there.correct is True
                assert comparable(there) == comparable(here)
            remote.close()
        local.close()


def test_registered_remote_id_passes_check_env_with_warnings_as_errors():
    with running(create_app(EnvSpec(max_steps=5))) as url:
        env = gym.make(vera_env.REMOTE_ENV_ID, base_url=url)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                check_env(env.unwrapped)
        finally:
            env.close()


def test_remote_env_in_async_vector_env_plays_like_local():
    spec = EnvSpec(max_steps=8, reward=NO_STRENGTH)  # remote strength: the test above
    policy = OraclePolicy(BUILTIN)
    with running(create_app(spec)) as url:
        envs = gym.make_vec(vera_env.REMOTE_ENV_ID, num_envs=2, vectorization_mode="async",
                            wrappers=[EnvInfo], base_url=url)
        try:
            remote = play_vector(envs, policy, seeds=[0, 1])
        finally:
            close_vector_env(envs)
    local_env = spec.build(tasks=BUILTIN)
    local = [run_episode(local_env, policy, seed=seed) for seed in (0, 1)]
    local_env.close()
    assert [(a.task_id, a.status, a.correct, a.score) for a in remote] == \
        [(a.task_id, a.status, a.correct, a.score) for a in local]


def test_remote_unscorable_step_reward_is_nan_and_attempt_score_none(suite):
    # no emission gate: the bare answer is released, and graded unscorable (no judge)
    with running(create_app(EnvSpec(tasks=str(suite), max_steps=4, wrappers=()))) as url:
        env = VeraRemoteEnv(url)
        env.reset(options={"task_id": "drinks-judged"})
        _, reward, terminated, _, info = env.step("FINAL ANSWER: 5.0")
        attempt = run_episode(env, OraclePolicy(load_tasks(suite)), task_id="drinks-judged")
        env.close()
    assert math.isnan(reward) and terminated and info[keys.UNSCORABLE] is True
    assert info[keys.CORRECT] is None and set(info) == set(keys.INFO_KEYS)
    assert attempt.unscorable and attempt.score is None


def test_remote_errors_are_the_local_types():
    with running(create_app(EnvSpec(max_steps=4))) as url:
        env = VeraRemoteEnv(url)
        with pytest.raises(ResetNeeded, match="reset"):
            env.step("<command>ls</command>")
        with pytest.raises(UnknownTaskError, match="no task 'nope'"):
            env.reset(options={"task_id": "nope"})
        with pytest.raises(ValueError, match=r"unknown reset options \['level'\]"):
            env.reset(options={"level": 3})
        env.reset(options={"task_id": BUILTIN.ids()[0]})
        with pytest.raises(TypeError, match="action must be str"):
            env.step(b"ls")  # type: ignore[arg-type]
        env.close()


def test_remote_full_server_raises_remote_env_error_capacity_reached():
    with running(create_app(EnvSpec(max_steps=4), config=ServeConfig(max_sessions=1))) as url:
        first, second = VeraRemoteEnv(url), VeraRemoteEnv(url)
        first.reset(seed=0)
        with pytest.raises(RemoteEnvError, match="Server at capacity") as err:
            second.reset(seed=0)
        assert err.value.code == "CAPACITY_REACHED" and isinstance(err.value, SandboxError)
        first.close()
        second.close()


def test_idle_session_expires_closing_its_sandbox_and_socket():
    app = create_app(EnvSpec(max_steps=4), config=ServeConfig(idle_timeout_s=0.4))
    registry = app.state.vera.registry
    with running(app) as url:
        env = VeraRemoteEnv(url)
        env.reset(options={"task_id": BUILTIN.ids()[0]})
        workspace = registry.sessions()[0]
        assert eventually(lambda: not registry.sessions())  # expired: env and sandbox closed
        assert workspace.closed
        time.sleep(2.0)  # the socket outlives the session by one poll and a second
        with pytest.raises(RemoteEnvError, match="lost mid-episode"):
            env.step("<command>ls</command>")
        assert env.reset(options={"task_id": BUILTIN.ids()[0]})[1][keys.STEP] == 0
        metrics = app.state.vera.metrics.render().decode()
        env.close()
    assert 'vera_serve_sessions_closed_total{reason="idle"} 1.0' in metrics


def test_remote_env_bearer_token_from_argument():
    with running(create_app(EnvSpec(max_steps=4), config=ServeConfig(token="t0k"))) as url:
        with pytest.raises(RemoteEnvError):
            VeraRemoteEnv(url, token="").reset(seed=0)
        env = VeraRemoteEnv(url, token="t0k")
        assert env.reset(seed=0)[1][keys.STEP] == 0
        env.close()


@pytest.mark.parametrize("text,code,kind,message", [
    ("ResetNeeded: call reset", "EXECUTION_ERROR", ResetNeeded, "call reset"),
    ("SandboxError: bwrap died", "EXECUTION_ERROR", SandboxError, "bwrap"),
    ("Server at capacity: 2/2 sessions active.", "CAPACITY_REACHED", RemoteEnvError,
     "Server at capacity"),
    ("something else entirely", "UNKNOWN", RemoteEnvError, "something else"),
])
def test_translate_server_error_frames_to_local_exceptions(text, code, kind, message):
    exc = _translate(text, code)
    assert type(exc) is kind and message in str(exc)
    assert not isinstance(exc, RemoteEnvError) or exc.code == code


def test_training_collection_runs_unchanged_on_remote_envs():
    collect = pytest.importorskip("vera_env.training.scripts.collect").collect
    from vera_env.training.starts import Start

    starts = [Start(task_id, 0) for task_id in BUILTIN.ids()[:2]]
    policy = OraclePolicy(BUILTIN)
    spec = EnvSpec(max_steps=8, reward=NO_STRENGTH)  # remote strength: the first test
    with running(create_app(spec)) as url:
        remote = collect(BUILTIN, policy, starts, make_env_fn=lambda: VeraRemoteEnv(url),
                         concurrency=2)
    local = collect(BUILTIN, policy, starts, concurrency=2,
                    make_env_fn=lambda: spec.build(tasks=BUILTIN))
    keep = ("task_id", "status", "correct", "score", "actions", "observations", "rewards")
    assert [{k: r[k] for k in keep} for r in remote] == [{k: r[k] for k in keep} for r in local]
    assert all(r["correct"] is True for r in remote)


def test_openenv_observation_carries_every_info_key():
    """A new info key must reach the wire: the observation model forbids unknown fields."""
    from vera_env.serve.openenv_app import VeraObservation

    assert set(keys.INFO_KEYS) <= set(VeraObservation.model_fields)


def test_constructing_remote_env_imports_neither_gradio_nor_openenv():
    """Issue 21: building one env took 18.8 s because OpenEnv's client imports gradio."""
    code = ("import sys\n"
            "from vera_env.serve import VeraRemoteEnv\n"
            "env = VeraRemoteEnv('http://127.0.0.1:9')\n"  # constructing opens no socket
            "env.close()\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'gradio', 'openenv', 'fastmcp', 'IPython', 'fastapi'}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_remote_step_rewards_equal_in_process_rewards_turn_by_turn(suite):
    """The same actions (a malformed turn, the reference solution, an unscorable answer)
    give the same observation, reward, flags and info remotely as in process."""
    tasks = load_tasks(suite)
    spec = EnvSpec(tasks=str(suite), max_steps=6, wrappers=())
    script = {"drinks-mean": ["no tags at all", NODE, "FINAL ANSWER: 5.0"],
              "drinks-judged": ["FINAL ANSWER: 5.0"]}
    local = spec.build(tasks=tasks)
    with running(create_app(spec)) as url:
        remote = VeraRemoteEnv(url)
        for task_id, actions in script.items():
            assert remote.reset(options={"task_id": task_id}) == \
                local.reset(options={"task_id": task_id})
            for action in actions:
                there, here = remote.step(action), local.step(action)
                assert there[0] == here[0] and timeless(there[2:]) == timeless(here[2:])
                assert there[1] == here[1] or (math.isnan(there[1]) and here[4][keys.UNSCORABLE])
        remote.close()
    local.close()


def test_default_reply_wait_outlasts_the_worst_step_of_the_default_env():
    """A reply is one step: a client that gives up before the server's worst step would
    call a step the server is still bounding a fault."""
    wait = inspect.signature(VeraRemoteEnv).parameters["message_timeout_s"].default
    assert wait > EnvSpec().step_bound_s()
