"""ForcedAnswer: turn analysis already done into an answer before the budget runs out.

The largest measured loss of the reference run: 22 of 73 problems (30%) produced no
usable answer at all — 12 exhausted the budget, 10 were graded on an empty or stub
emission. Those runs had done the analysis; they never committed. So in the last
``reserve`` steps the episode is put in phase ``forced``: nothing the model says is run,
and only a usable answer ends the episode. If the budget still ends without one, the
model is asked once more (phase ``extra``); an answer obtained that way is marked
``answer_forced``.

The rule lives in the env, behind its ``forced_reserve`` switch: the env moves the
phase at the end of each step and renders the observation of the phase it set (the
forced prompt: the bounded analysis and "give your single best answer"), so
``env.render()`` shows what the model was asked. This wrapper only turns the switch on,
as ``EmissionGate`` turns on the gate. When it forced the next turn itself, after
``step`` had returned, it re-entered the env and each forced step was rendered twice.

``info["prefill"]`` is ``"FINAL ANSWER: "`` whenever the next turn is forced, so a
policy that can start the assistant turn (vLLM's ``continue_final_message``) removes the
need for compliance: asked in plain words, one model kept emitting
``I need to identify the bacterium ... <tool_call>`` and was recorded with no answer.

Example:
    >>> from vera_env import VeraEnv
    >>> from vera_env.wrappers import ForcedAnswer
    >>> env = ForcedAnswer(VeraEnv("builtin", max_steps=10), reserve=3)
    >>> obs, info = env.reset(seed=0)
    >>> info["forcing"], env.unwrapped.forced_reserve
    (False, 3)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from vera_env.env import PREFILL, vera_base

__all__ = ["PREFILL", "ForcedAnswer"]


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
        vera_base(self.env).forced_reserve = reserve

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        """Reset with forcing on (it may have been switched off since ``__init__``)."""
        vera_base(self.env).forced_reserve = self.reserve
        return super().reset(seed=seed, options=options)

    def close(self) -> None:
        vera_base(self.env).forced_reserve = 0
        super().close()
