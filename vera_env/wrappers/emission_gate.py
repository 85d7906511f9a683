"""EmissionGate: release an answer only when the analysis behind it verified.

29% of the reference run's errors were emission failures: answers stated with nothing
checked behind them. With this gate, a final answer is released only if some leaf node
of the analysis graph (after this turn's own node is recorded) has a check that passed
and was not shown to be non-discriminating. Otherwise the answer is withheld with a
nudge and the episode continues; the same turn's command and node still take effect,
and ``info["gated"]`` counts the withholdings.

The gate never costs the model its answer: on the last step of the budget, and in a
forced-answer turn, the answer is released whatever the gate says.

The rule (``AnalysisState.leaf_verified``), the nudge (``GATE_NUDGE``) and the count
(``info["gated"]``) all live in the env, behind its ``require_verified_leaf`` switch;
this wrapper only turns the switch on, as ``ForcedAnswer`` only steers the phase. So
the env's own ``info`` and observation already tell the gate's outcome, and no wrapper
order can see a different rule.

Example:
    >>> from vera_env import VeraEnv
    >>> from vera_env.wrappers import EmissionGate
    >>> env = EmissionGate(VeraEnv("builtin", max_steps=10))
    >>> env.unwrapped.require_verified_leaf
    True
    >>> env.close()
    >>> env.unwrapped.require_verified_leaf
    False
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from vera_env.env import GATE_NUDGE, vera_base

__all__ = ["GATE_NUDGE", "EmissionGate"]


class EmissionGate(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Withhold answers that no verified leaf supports, while budget remains.

    Args:
        env: A ``VeraEnv``, possibly wrapped.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)
        vera_base(self.env).require_verified_leaf = True

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset with the gate on (it may have been switched off since ``__init__``)."""
        vera_base(self.env).require_verified_leaf = True
        return super().reset(seed=seed, options=options)

    def close(self) -> None:
        vera_base(self.env).require_verified_leaf = False
        super().close()
