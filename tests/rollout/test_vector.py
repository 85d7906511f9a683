"""Gymnasium vector envs (sync and async) over VeraEnv, in the real sandbox."""

from __future__ import annotations

import os
import signal
import time
from functools import partial
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces.utils import flatten, unflatten
from gymnasium.vector import AutoresetMode
from processes import owned_roots, processes_with

import vera_env
from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.observation.spaces import FreeText
from vera_env.rollout import run_episode
from vera_env.rollout.vector import EnvInfo, close_vector_env, env_info, play_vector
from vera_env.sandbox.reaper import reap_orphans

NODE = ("<command>wc -l alcohol.txt</command>\n"
        'NODE kind=load summary="5 lines" artifact=alcohol.txt\n'
        'CHECK conservation "3 valid rows" :: test $(awk -F\'\\t\' \'NR>1 && $3!=-999\' '
        'alcohol.txt | wc -l) -eq 3 && echo True || echo False\n')
ANSWER_RIGHT = "FINAL ANSWER: 5.0"


def make(tasks, mode, n=2, **vector_kwargs):
    return gym.make_vec(vera_env.ENV_ID, num_envs=n, vectorization_mode=mode,
                        vector_kwargs=vector_kwargs, wrappers=[EnvInfo], tasks=tasks,
                        max_steps=4)


def comparable(attempt) -> dict:
    """The Attempt without its timings (wall_s, each check's duration_s)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("wall_s", "duration_s")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(attempt.to_dict())


def test_free_text_flattens_to_code_points_and_back():
    space = FreeText(16)
    for text in ("", "a:b\n$ µ→", "\udc80bytes\0", "x" * 16):
        flat = flatten(space, text)
        assert flat.shape == (16,) and unflatten(space, flat) == text


@pytest.mark.parametrize("mode,kwargs", [("sync", {}), ("async", {"shared_memory": True}),
                                         ("async", {"shared_memory": False})])
def test_make_vec_steps_every_sub_env_in_its_own_workspace(alcohol_task, mode, kwargs):
    envs = make([alcohol_task], mode, **kwargs)
    try:
        obs, infos = envs.reset(seed=0)
        assert isinstance(obs, tuple) and all("alcohol.txt" in o for o in obs)
        assert envs.observation_space.contains(obs)
        obs, rewards, term, trunc, infos = envs.step(("<command>touch mine</command>",
                                                      "<command>ls</command>"))
        listing = env_info(infos, 1)[keys.COMMAND_OUTPUT]
        assert "alcohol.txt" in listing and "mine" not in listing  # separate workspaces
        assert rewards.tolist() == [0.0, 0.0] and not term.any() and not trunc.any()
        assert "- mine" in obs[0] and "- mine" not in obs[1]
    finally:
        envs.close()


def test_async_observations_equal_sync_ones_with_and_without_shared_memory(alcohol_task):
    actions = (NODE, "<command>head -2 alcohol.txt</command>")
    seen = []
    for mode, kwargs in (("sync", {}), ("async", {"shared_memory": True}),
                         ("async", {"shared_memory": False})):
        envs = make([alcohol_task], mode, **kwargs)
        try:
            first, _ = envs.reset(seed=0)
            second, *_ = envs.step(actions)
            seen.append((tuple(first), tuple(second)))
        finally:
            envs.close()
    assert seen[0] == seen[1] == seen[2]


def test_node_dict_beside_empty_node_batches_without_patching_gymnasium(alcohol_task):
    original = gym.vector.VectorEnv._add_info
    envs = make([alcohol_task], "sync")
    try:
        envs.reset(seed=0)
        _, _, _, _, infos = envs.step(("<command>ls</command>", NODE))
        assert infos["node"]["_id"].tolist() == [False, True]
        assert infos["node"]["id"][1] == "n1"
        assert gym.vector.VectorEnv._add_info is original
        assert env_info(infos, 0)[keys.NODE] == {}
    finally:
        envs.close()


def test_env_info_keeps_correct_none_that_batching_would_turn_false(alcohol_task):
    envs = make([alcohol_task], "sync")
    try:
        envs.reset(seed=0)
        _, _, term, _, infos = envs.step((ANSWER_RIGHT, "<command>ls</command>"))
        assert term.tolist() == [True, False]
        assert env_info(infos, 0)[keys.CORRECT] is True
        assert env_info(infos, 1)[keys.CORRECT] is None
    finally:
        envs.close()


def test_next_step_autoreset_ignores_the_action_and_starts_a_new_episode(alcohol_task):
    envs = make([alcohol_task], "sync")
    try:
        envs.reset(seed=0)
        _, rewards, term, _, _ = envs.step((ANSWER_RIGHT, "<command>ls</command>"))
        assert term[0] and rewards[0] > 0
        obs, rewards, term, trunc, infos = envs.step(("<command>touch ghost</command>",
                                                      "<command>ls</command>"))
        first = env_info(infos, 0)
        assert (rewards[0], term[0], trunc[0]) == (0.0, False, False)
        assert first[keys.STEP] == 0 and first[keys.COMMAND_OUTPUT] == ""
        assert "ghost" not in obs[0]  # the action given at the autoreset was never run
        assert env_info(infos, 1)[keys.STEP] == 2
    finally:
        envs.close()


def test_same_step_autoreset_reports_final_info_and_new_first_observation(alcohol_task):
    envs = make([alcohol_task], "sync", autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        envs.reset(seed=0)
        obs, _, term, _, infos = envs.step((ANSWER_RIGHT, "<command>ls</command>"))
        assert term[0] and infos["_final_info"].tolist() == [True, False]
        assert env_info(infos["final_info"], 0)[keys.CORRECT] is True
        assert env_info(infos, 0)[keys.STEP] == 0 and "Steps left: 4" in obs[0]
    finally:
        envs.close()


@pytest.mark.parametrize("mode,autoreset", [("sync", AutoresetMode.NEXT_STEP),
                                            ("sync", AutoresetMode.DISABLED),
                                            ("async", AutoresetMode.SAME_STEP)])
def test_play_vector_attempts_equal_local_run_episode(alcohol_task, mode, autoreset):
    from vera_env.policies import ScriptedPolicy

    policy = ScriptedPolicy([NODE, "<command>ls</command>", ANSWER_RIGHT])
    seeds = [0, 1, 2]
    env = gym.make(vera_env.ENV_ID, tasks=[alcohol_task], max_steps=4)
    try:
        local = [run_episode(env, policy, seed=s) for s in seeds]
    finally:
        env.close()
    envs = make([alcohol_task], mode, autoreset_mode=autoreset)
    try:
        batched = play_vector(envs, policy, seeds)
    finally:
        envs.close()

    assert [comparable(a) for a in batched] == [comparable(a) for a in local]
    assert [a.status for a in batched] == ["ok"] * 3 and batched[0].n_checks == 1


def test_async_close_removes_every_workspace_and_process(alcohol_task):
    envs = make([alcohol_task], "async")
    pids = [p.pid for p in envs.processes]
    envs.reset(seed=0)
    envs.step(("<command>ls</command>",) * 2)
    assert all(owned_roots(pid) for pid in pids)
    envs.close()
    assert not any(owned_roots(pid) for pid in pids)


@pytest.mark.serial  # any env made meanwhile, in another test process, reaps the root first
def test_killed_async_worker_leaves_no_process_and_its_workspace_is_reaped(alcohol_task):
    envs = make([alcohol_task], "async")
    victim = envs.processes[1].pid
    try:
        envs.reset(seed=0)
        marker = "sleep 37.5"
        envs.step_async(("<command>ls</command>", f"<command>{marker}</command>"))
        deadline = time.monotonic() + 10
        while not processes_with(marker, settle_s=0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(marker, settle_s=0), "the command never started"
        (root,) = owned_roots(victim)
        os.kill(victim, signal.SIGKILL)
        envs.processes[1].join(timeout=10)
        assert processes_with(marker) == []  # bwrap died with its parent
        assert root.exists()  # nothing ran the worker's finalizers...
        with pytest.raises(EOFError):
            envs.step_wait()
    finally:
        close_vector_env(envs)
    # ...so they are removed from outside (by us, or by any new env on this machine)
    assert not root.exists()
    assert not owned_roots(envs.processes[0].pid)


def test_reap_orphans_removes_the_root_of_a_dead_process():
    import subprocess
    import sys

    code = ("import os, vera_env.sandbox.reaper as r; print(r.owned_root(), flush=True); "
            "os._exit(0)")  # exits without finalizers, as a killed worker does
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    root = Path(out.strip())
    assert root.is_dir()
    reap_orphans()
    assert not root.exists()


def test_reap_orphans_leaves_a_live_owner_alone(alcohol_task):
    env = gym.make(vera_env.ENV_ID, tasks=[alcohol_task], max_steps=2)
    try:
        env.reset(seed=0)
        (root,) = owned_roots(os.getpid())
        assert root not in reap_orphans() and root.exists()
    finally:
        env.close()
    assert not owned_roots(os.getpid())


def test_rewards_are_float64_and_flags_bool(alcohol_task):
    envs = make([alcohol_task], "sync")
    try:
        envs.reset(seed=0)
        _, rewards, term, trunc, _ = envs.step((NODE, NODE))
        assert rewards.dtype == np.float64 and term.dtype == np.bool_ and trunc.dtype == np.bool_
        assert rewards[0] == rewards[1] > 0
    finally:
        envs.close()


class _FailsOn:
    """Scripted turns, but raises for the episode started with one seed's task draw."""

    def __init__(self, turns, bad_seed_marker, exc):
        self.turns, self.bad, self.exc = turns, bad_seed_marker, exc
        self.bad_tasks: set[str] = set()

    def begin_episode(self, info):
        self.bad_tasks.discard(info["task_id"])

    def act(self, observation, info):
        if info["task_id"] == self.bad and info["step"] == 1:
            raise self.exc
        step = info["step"]
        return self.turns[step] if step < len(self.turns) else ""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_policy_fault_ends_its_attempt_not_the_batch(tmp_path, mode):
    """A policy that raised for one sub-env used to take the whole ``play_vector`` batch
    down; now that attempt records the fault and its sub-env plays the next seed."""
    from vera_env.errors import PolicyError
    from vera_env.rollout.vector import make_vector_env
    from vera_env.spec import EnvSpec
    from vera_env.tasks import Task

    data = tmp_path / "data"
    data.mkdir()
    (data / "alcohol.txt").write_text("id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n")
    tasks = [Task(id=f"t{i}", question="Mean drinks, ignoring -999? One decimal.",
                  answer="5.0", grader={"kind": "numeric", "abs_tol": 0.05}, data_dir=data)
             for i in range(2)]
    policy = _FailsOn([NODE, "<command>ls</command>", ANSWER_RIGHT], "t1",
                      PolicyError("endpoint down"))
    spec = EnvSpec(max_steps=4, wrappers=())
    envs = make_vector_env(partial(spec.build, tasks=tasks), 2, mode=mode)
    try:
        attempts = play_vector(envs, policy, list(range(6)))
    finally:
        close_vector_env(envs)
    by_task = {a.task_id for a in attempts}
    assert by_task == {"t0", "t1"} and len(attempts) == 6
    for attempt in attempts:
        if attempt.task_id == "t1":
            assert (attempt.status, attempt.score) == ("provider", None)
            assert "endpoint down" in attempt.error and len(attempt.steps) == 1
        else:
            assert attempt.status == "ok" and attempt.correct is True


def test_vector_env_fault_is_recorded_on_every_unfinished_attempt(alcohol_task):
    """A sub-env whose sandbox fails at reset raises out of the vector env; the attempts
    in flight and the ones not yet played record it (unscorable), none is dropped."""
    from vera_env.errors import SandboxError
    from vera_env.policy import ScriptedPolicy
    from vera_env.rollout.vector import make_vector_env
    from vera_env.sandbox import make_sandbox

    class Flaky:
        """Stages twice, then the disk is full (a ``Sandbox``: ``name``, ``stage``)."""

        def __init__(self):
            self.inner, self.name, self.calls = make_sandbox("auto"), "flaky", 0

        def stage(self, files):
            self.calls += 1
            if self.calls > 2:
                raise SandboxError("disk full while staging")
            return self.inner.stage(files)

        def close(self):
            self.inner.close()

    flaky = Flaky()  # shared: the third staging of the batch fails
    envs = make_vector_env(lambda: VeraEnv([alcohol_task], max_steps=4, sandbox=flaky), 2)
    try:
        attempts = play_vector(envs, ScriptedPolicy([ANSWER_RIGHT]), [0, 1, 2, 3, 4])
    finally:
        close_vector_env(envs)
    assert [a.status for a in attempts[:2]] == ["ok", "ok"]
    assert all(a.status == "sandbox" and a.unscorable and a.score is None
               for a in attempts[2:4])
    assert attempts[4].status == "error" and "not played" in attempts[4].error
    assert attempts[4].unscorable and attempts[4].seed == 4


def test_make_vector_env_builds_from_a_spec_with_env_info(alcohol_task):
    from vera_env.rollout.vector import make_vector_env
    from vera_env.spec import EnvSpec

    spec = EnvSpec(max_steps=3, wrappers=("gate",))
    envs = make_vector_env(partial(spec.build, tasks=[alcohol_task]), 2)
    try:
        _, infos = envs.reset(seed=0)
        assert env_info(infos, 1)[keys.TASK_ID] == "alcohol-mean"
        assert envs.envs[0].unwrapped.max_steps == 3
    finally:
        envs.close()
    with pytest.raises(ValueError, match="mode"):
        make_vector_env(spec, 1, mode="threads")  # type: ignore[arg-type]
