"""The policy protocol, and the scripted policies the package itself replays.

A policy sees exactly what a model would see — the observation text — plus the ``info``
dict of the last step (``info["prefill"]`` says how a forced answer should start). It
returns the model's raw turn text; the environment does all parsing and scoring, so a
policy can never influence its reward except through what it says.

The scripted policies live here, not in ``policies/``, because the package replays
fixed turns itself: golden scenarios, ``vera-env tasks validate`` (each task's reference
and careless solutions) and the demo. ``policies`` re-exports them beside the model
policies; ``vera_env`` never imports ``policies``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vera_env import info as keys

if TYPE_CHECKING:
    from vera_env.tasks import TaskSource

__all__ = ["OraclePolicy", "Policy", "ScriptedPolicy", "careless_policy"]


@runtime_checkable
class Policy(Protocol):
    """Maps an observation to the next raw turn.

    ``act`` may raise ``vera_env.errors.PolicyError`` for a transport or provider fault;
    the rollout records that episode as ``provider``, never as a wrong answer. Policies
    that keep per-episode state implement ``begin_episode(info)``; the rollout calls it
    after ``reset`` when present. Optional too: ``async aact(observation, info)`` (used by
    ``arun_many``) and ``last_usage() -> (prompt_tokens, completion_tokens)`` for the
    call just made in this thread or task (the rollout sums it into the ``Attempt``).
    """

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Return the next turn."""
        ...


class ScriptedPolicy:
    """Replays fixed turns.

    Args:
        turns: One script for every task, or a mapping from task id to its script.
        when_done: What to say once a script is exhausted (default: an empty turn,
            which the environment rejects — a silent model).

    Raises:
        ValueError: ``turns`` is empty.
    """

    def __init__(self, turns: Sequence[str] | Mapping[str, Sequence[str]], *,
                 when_done: str = "") -> None:
        if not turns:
            raise ValueError("ScriptedPolicy needs at least one turn or one task script")
        if isinstance(turns, Mapping):
            self._scripts = {k: tuple(v) for k, v in turns.items()}
            self._shared: tuple[str, ...] | None = None
        else:
            self._scripts, self._shared = {}, tuple(turns)
        self.when_done = when_done

    def script_for(self, task_id: str) -> tuple[str, ...]:
        """The turns this policy plays on ``task_id``.

        Raises:
            KeyError: A per-task policy has no script for ``task_id``.
        """
        if self._shared is not None:
            return self._shared
        if task_id not in self._scripts:
            raise KeyError(f"no script for task {task_id!r}")
        return self._scripts[task_id]

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The turn at index ``info["step"]`` of the task's script."""
        script = self.script_for(info[keys.TASK_ID])
        index = int(info[keys.STEP])
        return script[index] if index < len(script) else self.when_done

    async def aact(self, observation: str, info: dict[str, Any]) -> str:
        """Async form of ``act``."""
        await asyncio.sleep(0)
        return self.act(observation, info)


class OraclePolicy(ScriptedPolicy):
    """Replays each task's reference solution (``Task.solution``).

    Solutions are looked up by ``info["task_id"]`` when an episode needs one, so the
    oracle serves any instance of an unbounded source (every builtin seed).

    Args:
        tasks: The task source the environment draws from.
    """

    def __init__(self, tasks: TaskSource) -> None:
        super().__init__(["(unused)"])
        self._tasks = tasks

    def script_for(self, task_id: str) -> tuple[str, ...]:
        """The task's reference solution.

        Raises:
            ValueError: The task has no reference solution.
        """
        solution = self._tasks.get(task_id).solution
        if not solution:
            raise ValueError(f"task {task_id!r} has no reference solution to replay")
        return tuple(solution)


def careless_policy(tasks: TaskSource | Sequence[Any]) -> ScriptedPolicy:
    """A policy that falls into each task's trap (tasks without a trap are skipped)."""
    return ScriptedPolicy({t.id: t.trap.careless_solution for t in tasks if t.trap})
