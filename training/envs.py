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
from dataclasses import dataclass

import gymnasium as gym

from vera_env.observation.prompts import ObservationVariant
from vera_env.rollout import EnvPool
from vera_env.spec import EnvSpec, SandboxName
from vera_env.tasks import TaskSource, load_tasks
from vera_env.tasks.named import SOURCE_NAMES, named_source
from vera_env.verification.rewards import RewardConfig
from vera_env.wrappers import WrapperName

__all__ = ["EnvOptions", "LockstepEnvs", "make_env", "task_source"]

_PACKAGE = EnvSpec()
"""The package's defaults, which ``EnvOptions`` takes as its own."""


def make_env(tasks: TaskSource, options: EnvOptions, *,
             reward: RewardConfig | None = None) -> gym.Env[str, str]:
    """A new environment on ``tasks`` as ``options`` say, for tests and benchmarks."""
    return options.env_spec(reward).build(tasks=tasks)


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


@dataclass
class EnvOptions:
    """The environment knobs of the training scripts, declared once (a dataclass base).

    ``vera_env.training.scripts.grpo.Args`` and ``vera_env.training.scripts.collect.Args`` both inherit
    these fields, so a collection and a training run given the same flags play the same
    environment. The defaults are ``EnvSpec``'s own (``_PACKAGE``), the environment every
    other entry point builds: declared per script they had drifted apart (a 6-step budget
    for ``grpo``, 20 for ``collect``, 50 for the package; ``forced`` alone for training,
    ``gate`` then ``forced`` everywhere else).
    """

    env_max_steps: int = _PACKAGE.max_steps
    """Step budget of one episode (turns the model may take)."""
    wrappers: tuple[WrapperName, ...] = _PACKAGE.wrappers
    """Env wrappers, innermost first: 'gate' (EmissionGate), 'forced' (ForcedAnswer)."""
    reserve: int = _PACKAGE.reserve
    """Final steps of the budget in which 'forced' demands an answer (clipped to the budget)."""
    observation_variant: ObservationVariant = _PACKAGE.observation_variant
    """How observations tell the rules: full, or compact (short, no placeholders: small models)."""
    state_budget: int = _PACKAGE.state_budget
    """Tokens of the analysis graph in an observation. Step-wise GRPO: this and the env's
    command window (12,000 characters; 3,000 compact) bound every sample's prompt,
    whatever the turn, and the prompt is fitted to the model's window besides."""
    sandbox: SandboxName = _PACKAGE.sandbox
    """Sandbox backend: auto, bwrap, bwrap-server or local (local is not isolation)."""

    def env_spec(self, reward: RewardConfig | None = None) -> EnvSpec:
        """The ``EnvSpec`` these options name, ``reserve`` clipped to the budget.

        Clipping keeps a short debugging budget (``--env-max-steps 2``) valid with the
        default reserve instead of failing validation.

        Raises:
            pydantic.ValidationError: A bad bound, or an unknown wrapper, sandbox or variant
                from a caller the type checker does not see (a test, a config file).
        """
        return EnvSpec(max_steps=self.env_max_steps, wrappers=tuple(self.wrappers),
                       reserve=min(self.reserve, self.env_max_steps), sandbox=self.sandbox,
                       reward=reward or RewardConfig(),
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
        self._envs: list[gym.Env[str, str]] = [self._pool.acquire()]

    @property
    def held(self) -> int:
        """Environments built so far (a batch larger than this builds more first)."""
        return len(self._envs)

    def take(self, n: int) -> list[gym.Env[str, str]]:
        """``n`` environments (the first ``n`` held, more leased when missing)."""
        while len(self._envs) < n:
            self._envs.append(self._pool.acquire())
        return self._envs[:n]

    def close(self) -> None:
        """Close every environment (the pool closes all it built). Idempotent."""
        self._envs.clear()
        self._pool.close()
