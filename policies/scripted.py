"""Scripted policies: fixed turns, replayed. The oracle replays a task's reference solution.

They make the environment testable without a model: golden scenarios, the demo, the
red-team suite and benchmarks all drive the real environment with scripted text. They
are stateless across calls (the turn is chosen by ``info["step"]``), so one instance can
serve many concurrent episodes.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping, Sequence

from vera_env import info as keys
from vera_env.tasks import TaskSource

__all__ = ["OraclePolicy", "ScriptedPolicy", "careless_policy"]


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
