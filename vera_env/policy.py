"""The policy protocol: anything that turns an observation into a raw turn.

A policy sees exactly what a model would see — the observation text — plus the ``info``
dict of the last step (``info["prefill"]`` says how a forced answer should start). It
returns the model's raw turn text; the environment does all parsing and scoring, so a
policy can never influence its reward except through what it says.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["Policy"]


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
