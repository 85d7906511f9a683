# mypy: disallow-subclassing-any=False
# (verifiers ships no type information, so its base classes are `Any` to mypy here.)
"""A verifiers (0.4, ``verifiers.v1``) environment that plays vera in-process.

Measured against verifiers' own OpenEnv taskset over ``vera-env serve``: the
model saw a JSON dump of the whole observation plus an action schema, the transcript
grew every turn (4.4k -> 11.4k -> 21.8k characters over three turns), and
``reward or 0.0`` counted an unscorable step as 0. This adapter fixes all three:

- **The layout vera evaluates in.** A vera observation already holds everything the
  model needs (question, files, the analysis graph, the last outputs), so every step is
  ONE user message with the observation text and nothing else. A verifiers
  ``Interaction`` resumes its harness on the whole conversation, so the env cannot
  replace the prompt inside one; instead each step opens a fresh interaction (one
  rollout, one trace) holding that single message, and the model's reply is the raw
  turn text passed to ``env.step``. An episode is therefore one trace per step.
- **The reward is the episode's return**, recorded as ``vera_return`` on every trace of
  the episode (the way verifiers' best-of-n records an episode-level fact on every
  sibling), with the step's own reward as the metric ``vera_step_reward``.
- **Unscorable is kept out**, never 0: when a step reports ``info["unscorable"]`` (a
  sandbox fault, not the model's) or a NaN reward, ``vera_return`` is ``None`` on every
  trace ("scoring didn't run", verifiers' own convention) and each trace records an
  ``EnvError`` (the environment could not score), so the trace and the episode are not
  ``ok``: ``vf-eval --resume``
  re-runs it and trainers drop errored rollouts.

The vera env runs in this process (``EnvSpec(...).build()``), its blocking calls in a
worker thread. The model is reached through verifiers' own harness; the ``null``
harness in a ``subprocess`` runtime is the default, so no sandbox provider or login is
needed (``uv`` must be on ``PATH``: the harness runs its chat program with it).

Example (verifiers is an optional extra, so this is not a doctest; the recipe in
``docs/integrations/verifiers.md`` runs it)::

    from vera_env.integrations.verifiers import load_environment
    env = load_environment(task_ids=["seq.motif_count.easy.s0"], max_steps=8)
    [t.data.task_id for t in env.taskset]   # ['seq.motif_count.easy.s0']
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import verifiers.v1 as vf  # type: ignore[import-not-found, import-untyped, unused-ignore]
from pydantic import Field
from verifiers.v1.harnesses.null import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    NullHarnessConfig,
)

from vera_env import info as keys
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource, load_tasks

__all__ = ["TASKSET_ID", "VeraEnvConfig", "VeraEnvironment", "VeraTask", "VeraTaskData",
           "VeraTaskset", "VeraTasksetConfig", "load_environment"]

TASKSET_ID = "vera-env"
"""The taskset id verifiers resolves to this module once it is imported."""

RETURN_REWARD = "vera_return"
STEP_METRIC = "vera_step_reward"

# verifiers resolves a taskset id to a module by importing ``verifiers.v1.tasksets.<id>``
# or a top-level ``<id>``; a dotted id such as ``vera_env.integrations.verifiers`` fails
# there (its parent is not a package). Importing this module registers it under the
# first name, so the id ``vera-env`` resolves to it.
sys.modules.setdefault("verifiers.v1.tasksets.vera_env", sys.modules[__name__])


class VeraTaskData(vf.TaskData):
    """One dataset row: a vera task id. The prompt is None: the env opens each turn."""

    task_id: str


class VeraTask(vf.Task[VeraTaskData]):
    """A vera task as a verifiers task (scored by the env, not by reward hooks)."""


class VeraTasksetConfig(vf.TasksetConfig):
    """Which vera tasks are the rows, and how the vera env is set up."""

    source: str = "builtin"
    """A vera task source: ``builtin``, ``real``, a suite folder, a JSONL file, ..."""
    task_ids: list[str] = Field(default_factory=list)
    """The rows, in order; empty: every task of ``source``."""
    spec: dict[str, Any] = Field(default_factory=dict)
    """``vera_env.spec.EnvSpec`` fields (``max_steps``, ``observation_variant``, ...)."""


class VeraTaskset(vf.Taskset[VeraTask, VeraTasksetConfig]):
    """The rows: one task per vera task id."""

    def load(self) -> Iterator[VeraTask]:
        """One ``VeraTask`` per id (``task_ids``, else the whole source)."""
        ids = self.config.task_ids or list(load_tasks(self.config.source).ids())
        for task_id in ids:
            yield VeraTask(VeraTaskData(id=task_id, name=task_id, prompt=None,
                                        task_id=task_id), self.config.task)


def _default_player() -> Any:
    return vf.AgentConfig(harness=NullHarnessConfig(id="null"), runtime=vf.SubprocessConfig())


class VeraEnvConfig(vf.EnvConfig):
    """The env config: the ``player`` seat defaults to the ``null`` harness locally."""

    player: vf.AgentConfig = _default_player()


@dataclass
class _Played:
    """What one episode's steps left: the traces, in order, and the step rewards."""

    traces: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    unscorable: str = ""
    finished: bool = False


class VeraEnvironment(vf.Env[VeraEnvConfig]):
    """Plays one vera episode per task: one fresh interaction (one trace) per step."""

    def __init__(self, config: VeraEnvConfig) -> None:
        super().__init__(config)
        tasks_config = self.taskset.config
        self.vera_spec = EnvSpec(tasks=tasks_config.source, **tasks_config.spec)
        self._source: TaskSource | None = None

    def tasks(self) -> TaskSource:
        """The vera task source, loaded once per environment."""
        if self._source is None:
            self._source = load_tasks(self.vera_spec.tasks)
        return self._source

    async def run(self, task: Any, agents: Any) -> None:
        """Reset the vera env on the row's task, then play until it ends."""
        env = await asyncio.to_thread(self.vera_spec.build, tasks=self.tasks())
        try:
            obs, _ = await asyncio.to_thread(
                env.reset, options={"task_id": task.data.task_id})
            played = await self._play(env, obs, task, agents.player)
        finally:
            await asyncio.to_thread(env.close)
        _record(played)

    async def _play(self, env: Any, obs: str, task: Any, player: Any) -> _Played:
        """Step until the episode ends, a step is unscorable, or a model call fails."""
        played = _Played()
        while True:
            async with player.interaction(task) as interaction:
                segment = await interaction.turn(obs)
            played.traces.append(interaction.trace)
            if segment.terminated:  # the model call failed: the trace holds the error
                return played
            obs, reward, terminated, truncated, info = await asyncio.to_thread(
                env.step, _reply(segment))
            if info.get(keys.UNSCORABLE) or math.isnan(reward):
                interaction.trace.metrics[STEP_METRIC] = None
                played.unscorable = (info.get(keys.ERROR) or info.get(keys.GRADE_DETAIL)
                                     or "a step reported unscorable")
                return played
            interaction.trace.record_metric(STEP_METRIC, reward)
            played.rewards.append(float(reward))
            if terminated or truncated:
                played.finished = True
                return played


def _reply(segment: Any) -> str:
    """The model's raw turn: the last assistant message's text, unstripped."""
    for message in reversed(segment.messages):
        if getattr(message, "role", "") == "assistant":
            return str(message.content or "")
    return str(segment.last_reply)


def _record(played: _Played) -> None:
    """Put the episode's return on every trace, or ``None`` (and an error) when the
    episode cannot be scored."""
    if played.unscorable:
        error = vf.EnvError(f"vera could not score the episode (not the model's fault): "
                             f"{played.unscorable}")
        for trace in played.traces:
            trace.rewards[RETURN_REWARD] = None
            trace.record_error(error)
        return
    if not played.finished:  # a failed model call ended it: its trace holds the error
        for trace in played.traces:
            trace.rewards[RETURN_REWARD] = None
        return
    total = sum(played.rewards)
    for trace in played.traces:
        trace.record_reward(RETURN_REWARD, total)


def load_environment(*, source: str = "builtin", task_ids: list[str] | None = None,
                     player: Any = None, **spec: Any) -> VeraEnvironment:
    """A verifiers environment over vera tasks, built in this process.

    Args:
        source: The vera task source (``vera_env.tasks.load_tasks``).
        task_ids: The dataset rows, in order (None: every task of ``source``).
        player: A ``verifiers.v1.AgentConfig`` for the model's seat (None: the ``null``
            harness in a ``subprocess`` runtime).
        **spec: ``vera_env.spec.EnvSpec`` fields, e.g. ``max_steps=8``; validated here.

    Returns:
        The environment; run an episode with ``env.run_episode(task, ctx)`` inside
        ``async with env.serving():``.

    Raises:
        pydantic.ValidationError: ``spec`` holds a field ``EnvSpec`` does not have.
    """
    EnvSpec(tasks=source, **spec)  # fail here, not in the first rollout
    taskset = VeraTasksetConfig(id=TASKSET_ID, source=source, task_ids=task_ids or [],
                                spec=spec)
    config = VeraEnvConfig(taskset=taskset, player=player or _default_player())
    return VeraEnvironment(config)
