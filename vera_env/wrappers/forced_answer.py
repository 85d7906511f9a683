"""ForcedAnswer: turn analysis already done into an answer before the budget runs out.

The largest measured loss of the reference run: 22 of 73 problems (30%) produced no
usable answer at all — 12 exhausted the budget, 10 were graded on an empty or stub
emission. Those runs had done the analysis; they never committed. So in the last
``reserve`` steps the episode is put in phase ``forced``: nothing the model says is run,
and only a usable answer ends the episode. If the budget still ends without one, the
model is asked once more (phase ``extra``); an answer obtained that way is marked
``answer_forced``.

The wrapper steers the phase and the prefill only. The observation of an answer-only
phase (the forced prompt: the bounded analysis and "give your single best answer") is
the env's own, from ``VeraEnv.observe``, so ``env.render()`` shows what the model was
asked, and no observation is rendered twice by two owners.

``info["prefill"]`` is ``"FINAL ANSWER: "`` whenever the next turn is forced, so a
policy that can start the assistant turn (vLLM's ``continue_final_message``) removes the
need for compliance: asked in plain words, one model kept emitting
``I need to identify the bacterium ... <tool_call>`` and was recorded with no answer.

Example:
    >>> from vera_env import VeraEnv
    >>> from vera_env.wrappers import ForcedAnswer
    >>> env = ForcedAnswer(VeraEnv("builtin", max_steps=10), reserve=3)
    >>> obs, info = env.reset(seed=0)
    >>> info["forcing"]
    False
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym

from vera_env import info as keys
from vera_env.env import vera_base
from vera_env.phase import Phase
from vera_env.wire.answers import ANSWER_PREFIX

__all__ = ["PREFILL", "ForcedAnswer"]

PREFILL = ANSWER_PREFIX + " "


class ForcedAnswer(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Force a final answer in the last ``reserve`` steps, and ask once more after.

    Args:
        env: A ``VeraEnv``, possibly wrapped.
        reserve: How many final steps of the budget demand an answer.

    Raises:
        ValueError: ``reserve`` is not a positive int, or exceeds the step budget.
    """

    def __init__(self, env: gym.Env, reserve: int = 3) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, reserve=reserve)
        super().__init__(env)
        if not isinstance(reserve, int) or isinstance(reserve, bool) or reserve < 1:
            raise ValueError(f"reserve must be a positive int, got {reserve!r}")
        budget = vera_base(env).max_steps
        if reserve > budget:
            raise ValueError(f"reserve={reserve} is larger than the step budget "
                             f"max_steps={budget}")
        self.reserve = reserve

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._maybe_force(obs, info, ended=False)

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        base = vera_base(self.env)
        if base.phase is Phase.SPENT:
            # The budget ended without a commitment: ask once more, outside the budget.
            # The phase is the episode's, so the next episode gets its own extra ask.
            base.grant_extra_ask()
            return base.observe(), reward, False, False, self._mark(info)
        obs, info = self._maybe_force(obs, info, ended=terminated or truncated)
        return obs, reward, terminated, truncated, info

    def _maybe_force(self, obs: str, info: dict[str, Any], *, ended: bool
                     ) -> tuple[str, dict[str, Any]]:
        base = vera_base(self.env)
        if ended or base.steps_left > self.reserve:
            return obs, info
        base.force_answer()
        return base.observe(), self._mark(info)

    @staticmethod
    def _mark(info: dict[str, Any]) -> dict[str, Any]:
        return {**info, keys.FORCING: True, keys.PREFILL: PREFILL}
