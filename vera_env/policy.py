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
    from vera_env.llm import ChatClient
    from vera_env.tasks import TaskSource

__all__ = ["AsyncClosable", "AsyncPolicy", "ChatBacked", "EpisodeAware", "OraclePolicy",
           "Policy", "ReportsUsage", "ScriptedPolicy", "careless_policy"]


@runtime_checkable
class Policy(Protocol):
    """Maps an observation to the next raw turn.

    ``act`` may raise ``vera_env.errors.PolicyError`` for a transport or provider fault;
    the rollout records that episode as ``provider``, never as a wrong answer. Everything
    else a policy may offer is optional, and each option is a protocol of its own below
    (``EpisodeAware``, ``AsyncPolicy``, ``ReportsUsage``, ``AsyncClosable``,
    ``ChatBacked``): the rollout and the CLI test for one with ``isinstance``, so a policy
    opts in by defining the method, with no base class to inherit.
    """

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """Return the next turn."""
        ...



@runtime_checkable
class EpisodeAware(Protocol):
    """A policy that keeps per-episode state (a chat history, a per-task script).

    The rollout calls ``begin_episode`` after every ``reset``, before the first ``act``,
    so state from the previous episode on the same policy object cannot leak into this
    one.
    """

    def begin_episode(self, info: dict[str, Any]) -> None:
        """Start a new episode; ``info`` is the ``reset``'s (it names the task)."""
        ...


@runtime_checkable
class AsyncPolicy(Protocol):
    """A policy with a native coroutine form of ``act``.

    ``arun_many`` awaits it on the event loop; a policy without it has ``act`` run in a
    worker thread instead, which holds a thread per episode in flight.
    """

    async def aact(self, observation: str, info: dict[str, Any]) -> str:
        """Return the next turn."""
        ...


@runtime_checkable
class ReportsUsage(Protocol):
    """A policy that knows what its last model call cost.

    The rollout sums it into the ``Attempt`` (``prompt_tokens``, ``completion_tokens``).
    It must be read in the thread or task that made the call: policies shared by many
    episodes keep it per thread or task, not per object.
    """

    def last_usage(self) -> tuple[int | None, int | None]:
        """``(prompt_tokens, completion_tokens)`` of the last call; None: not reported."""
        ...


@runtime_checkable
class AsyncClosable(Protocol):
    """A policy holding connections that must be closed on the event loop that opened
    them (an async HTTP client); ``vera-env eval`` awaits ``aclose`` after the run."""

    async def aclose(self) -> None:
        """Release the policy's connections."""
        ...


@runtime_checkable
class ChatBacked(Protocol):
    """A policy that talks to an OpenAI-compatible endpoint through ``client``.

    ``vera-env eval`` sends one tiny request through it before any episode, so a wrong
    URL or model name fails in a second rather than as every attempt excluded later.
    """

    @property
    def client(self) -> ChatClient:
        """The endpoint's client."""
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
