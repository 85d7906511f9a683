"""EnvPool: environments built from one spec, reused, dropped when broken, always closed."""

from __future__ import annotations

import threading
from functools import partial

import pytest

from vera_env.env import VeraEnv
from vera_env.errors import PolicyError, SandboxError
from vera_env.rollout import EnvPool, map_episodes, run_many
from vera_env.rollout.pool import env_factory
from vera_env.spec import EnvSpec


class Counted:
    """A factory that counts what it built and what was closed."""

    def __init__(self, tasks, fail_after: int | None = None):
        self.tasks, self.fail_after = tasks, fail_after
        self.built: list[VeraEnv] = []
        self.closed = 0
        self.failed = threading.Event()

    def __call__(self) -> VeraEnv:
        if self.fail_after is not None and len(self.built) >= self.fail_after:
            self.failed.set()
            raise SandboxError("no room to stage a workspace")
        env = VeraEnv(self.tasks, max_steps=3)
        original = env.close

        def close() -> None:
            self.closed += 1
            original()
        env.close = close  # type: ignore[method-assign]
        self.built.append(env)
        return env


def test_pool_reuses_an_idle_env_and_closes_every_env_it_built(alcohol_task):
    factory = Counted([alcohol_task])
    pool = EnvPool(factory)
    with pool.lease() as first:
        with pool.lease() as second:
            assert first is not second
    with pool.lease() as again:
        assert again in (first, second)
    assert pool.built == 2
    pool.close()
    pool.close()  # idempotent
    assert factory.closed == 2
    with pytest.raises(RuntimeError, match="closed"):
        pool.acquire()


def test_env_whose_episode_raised_is_dropped_but_a_policy_fault_keeps_it(alcohol_task):
    factory = Counted([alcohol_task])
    with EnvPool(factory) as pool:
        with pytest.raises(PolicyError), pool.lease() as env:
            raise PolicyError("endpoint down")
        with pool.lease() as kept:
            assert kept is env
        with pytest.raises(RuntimeError), pool.lease() as broken:
            raise RuntimeError("the env raised mid-step")
        assert factory.closed == 1
        with pool.lease() as fresh:
            assert fresh is not broken and pool.built == 2


def test_pool_builds_from_a_spec():
    with EnvPool(EnvSpec(max_steps=7, wrappers=("forced",))) as pool, pool.lease() as env:
        assert type(env).__name__ == "ForcedAnswer" and env.unwrapped.max_steps == 7


def test_env_factory_rejects_what_builds_nothing():
    with pytest.raises(TypeError, match="EnvSpec or a factory"):
        env_factory("builtin")  # type: ignore[arg-type]


def test_map_episodes_leaves_a_callers_pool_open_and_closes_its_own(alcohol_task):
    factory = Counted([alcohol_task])
    pool = EnvPool(factory)
    ids = map_episodes(pool, range(4), lambda env, job: (job, id(env)), concurrency=2)
    assert [job for job, _ in ids] == [0, 1, 2, 3] and factory.closed == 0
    assert len({env for _, env in ids}) <= 2
    pool.close()
    own = Counted([alcohol_task])
    map_episodes(own, range(3), lambda env, job: job, concurrency=2)
    assert own.closed == len(own.built) >= 1


def test_run_many_records_an_env_that_cannot_be_built_as_that_attempts_status(alcohol_task):
    """The first env is built before any episode (a broken setup raises); a build that
    fails later is the attempt's ``sandbox`` status, and the batch goes on."""
    from vera_env.policy import ScriptedPolicy

    factory = Counted([alcohol_task], fail_after=1)

    class Waiting(ScriptedPolicy):
        def act(self, observation, info):  # hold the env, so the other job builds one
            factory.failed.wait(timeout=10)
            return super().act(observation, info)

    attempts = run_many(factory, Waiting(["FINAL ANSWER: 5"]), [(None, 0), (None, 1)],
                        concurrency=2)
    assert sorted(a.status for a in attempts) == ["ok", "sandbox"]
    lost = next(a for a in attempts if a.status == "sandbox")
    assert lost.unscorable and lost.score is None and "no room" in lost.error
    with pytest.raises(SandboxError, match="no room"):
        run_many(Counted([alcohol_task], fail_after=0), ScriptedPolicy(["x"]), [(None, 0)])


def test_run_many_takes_a_spec_and_a_partial_for_in_memory_tasks(alcohol_task):
    from vera_env.policy import ScriptedPolicy

    spec = EnvSpec(max_steps=3, wrappers=("gate",))
    steps = []
    attempts = run_many(partial(spec.build, tasks=[alcohol_task]),
                        ScriptedPolicy(["FINAL ANSWER: 5", "<command>true</command>",
                                        "FINAL ANSWER: 5"]), [(None, 0)],
                        on_step=lambda a: steps.append(len(a.steps)))
    (attempt,) = attempts
    assert attempt.gated == 1 and attempt.correct is True and steps == [1, 2, 3]
