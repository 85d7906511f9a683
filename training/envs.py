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

from vera_env.observation.prompts import ObservationVariant
from vera_env.rollout import EnvPool
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource
from vera_env.verification.rewards import RewardConfig

__all__ = ["LockstepEnvs", "env_spec", "make_env"]


def env_spec(*, max_steps: int, wrappers: Sequence[str] = ("forced",), reserve: int = 3,
             sandbox: str = "auto", reward: RewardConfig | None = None,
             observation_variant: ObservationVariant = "full",
             state_budget: int = 4000) -> EnvSpec:
    """The ``EnvSpec`` of a training environment (``reserve`` is clipped to ``max_steps``).

    Raises:
        pydantic.ValidationError: An unknown wrapper, sandbox or variant, or a bad bound.
    """
    return EnvSpec(max_steps=max_steps, wrappers=tuple(wrappers),  # type: ignore[arg-type]
                   reserve=min(reserve, max_steps), sandbox=sandbox,  # type: ignore[arg-type]
                   reward=reward or RewardConfig(), observation_variant=observation_variant,
                   state_budget=state_budget)


def make_env(tasks: TaskSource, **spec: Any) -> Any:
    """A new environment on ``tasks`` (keywords as ``env_spec``)."""
    return env_spec(**spec).build(tasks=tasks)


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

    def take(self, n: int) -> list[Any]:
        """``n`` environments (the first ``n`` held, more leased when missing)."""
        while len(self._envs) < n:
            self._envs.append(self._pool.acquire())
        return self._envs[:n]

    def close(self) -> None:
        """Close every environment (the pool closes all it built). Idempotent."""
        self._envs.clear()
        self._pool.close()
