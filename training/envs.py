"""Environments for training, built from one ``EnvSpec`` and kept between batches.

Every entry point builds its environments from a ``vera_env.spec.EnvSpec`` so that a
training run, a collection and an evaluation built from the same settings see the
same environment (wrappers, forced-answer reserve, observation variant, budgets).
``LockstepEnvs`` is what a rollout keeps: one environment per episode of the largest
batch seen, reused across batches (a sandbox root and its bookkeeping are not free to
rebuild every step), closed at the end. Its environments are leased from the package's
one pool (``vera_env.rollout.EnvPool``), held for the whole run, because lockstep play
steps every episode of a batch at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from vera_env.observation.prompts import ObservationVariant
from vera_env.rollout import EnvPool
from vera_env.spec import EnvSpec, SandboxName
from vera_env.tasks import TaskSource, load_tasks
from vera_env.tasks.named import SOURCE_NAMES, named_source
from vera_env.verification.rewards import RewardConfig
from vera_env.wrappers import WrapperName

__all__ = ["EnvOptions", "LockstepEnvs", "env_spec", "make_env", "task_source"]


def env_spec(*, max_steps: int, wrappers: Sequence[WrapperName] = ("forced",), reserve: int = 3,
             sandbox: SandboxName = "auto", reward: RewardConfig | None = None,
             observation_variant: ObservationVariant = "full",
             state_budget: int = 4000) -> EnvSpec:
    """The ``EnvSpec`` of a training environment (``reserve`` is clipped to ``max_steps``).

    Clipping keeps a short debugging budget (``--env-max-steps 2``) valid with the
    default reserve instead of failing validation.

    Raises:
        pydantic.ValidationError: A bad bound, or an unknown wrapper, sandbox or variant
            from a caller the type checker does not see (a test, a config file).
    """
    return EnvSpec(max_steps=max_steps, wrappers=tuple(wrappers),
                   reserve=min(reserve, max_steps), sandbox=sandbox,
                   reward=reward or RewardConfig(), observation_variant=observation_variant,
                   state_budget=state_budget)


def make_env(tasks: TaskSource, *, max_steps: int,
             wrappers: Sequence[WrapperName] = ("forced",), reserve: int = 3,
             sandbox: SandboxName = "auto", reward: RewardConfig | None = None,
             observation_variant: ObservationVariant = "full",
             state_budget: int = 4000) -> gym.Env[str, str]:
    """A new environment on ``tasks`` (keywords as ``env_spec``), for tests and benchmarks."""
    return env_spec(max_steps=max_steps, wrappers=wrappers, reserve=reserve, sandbox=sandbox,
                    reward=reward, observation_variant=observation_variant,
                    state_budget=state_budget).build(tasks=tasks)


def task_source(spec: str, difficulties: Sequence[str], num_prompts: int,
                start: str | None = None) -> TaskSource:
    """A named source (``builtin``, ``real``, ``perturbed``, ``canary``, ``curriculum``)
    as a fresh-seed stream of ``num_prompts`` seeds per type; anything else through
    ``load_tasks``. ``start``: the curriculum's warm-start rung (``named_source``).

    Fresh seeds per type keep a dataset from repeating a task instance, so a GRPO group
    never trains twice on the same start by accident.
    """
    if spec not in SOURCE_NAMES:
        if start is not None:
            raise ValueError(f"a start rung needs the curriculum source, not {spec!r}")
        return load_tasks(spec)
    return named_source(spec, seeds=range(num_prompts), difficulties=tuple(difficulties),
                        start=start)


class EnvOptions:
    """The environment knobs shared by the training scripts' ``Args`` (a mixin).

    ``vera_env.training.grpo.Args`` and ``vera_env.training.collect.Args`` both declare these fields, so
    one ``env_spec()`` turns either into the same ``EnvSpec``: a collection and a
    training run given the same flags play the same environment.
    """

    env_max_steps: int
    wrappers: tuple[WrapperName, ...]
    reserve: int
    sandbox: SandboxName
    observation_variant: ObservationVariant
    state_budget: int

    def env_spec(self) -> EnvSpec:
        """The ``EnvSpec`` these options name (see ``env_spec``)."""
        return env_spec(max_steps=self.env_max_steps, wrappers=self.wrappers,
                        reserve=self.reserve, sandbox=self.sandbox,
                        observation_variant=self.observation_variant,
                        state_budget=self.state_budget)


class LockstepEnvs:
    """Environments of one spec on one task source, grown on demand and held for a run.

    Args:
        spec: What to build.
        tasks: The (already loaded) task source every environment shares.

    The first environment is built at once, so a bad setting fails before training.
    """

    def __init__(self, spec: EnvSpec, tasks: TaskSource) -> None:
        self.spec, self.tasks = spec, tasks
        self._pool = EnvPool(lambda: spec.build(tasks=tasks))
        self._envs: list[Any] = [self._pool.acquire()]

    @property
    def held(self) -> int:
        """Environments built so far (a batch larger than this builds more first)."""
        return len(self._envs)

    def take(self, n: int) -> list[Any]:
        """``n`` environments (the first ``n`` held, more leased when missing)."""
        while len(self._envs) < n:
            self._envs.append(self._pool.acquire())
        return self._envs[:n]

    def close(self) -> None:
        """Close every environment (the pool closes all it built). Idempotent."""
        self._envs.clear()
        self._pool.close()
