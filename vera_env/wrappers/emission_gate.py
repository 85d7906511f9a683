"""EmissionGate: release an answer only when the analysis behind it verified.

29% of the reference run's errors were emission failures: answers stated with nothing
checked behind them. With this gate, a final answer is released only if some leaf node
of the analysis graph (after this turn's own node is recorded) has a check that passed
and was not shown to be non-discriminating. Otherwise the answer is withheld with a
nudge and the episode continues; the same turn's command and node still take effect,
and ``info["gated"]`` counts the withholdings.

The gate never costs the model its answer: on the last step of the budget, and in a
forced-answer turn, the answer is released whatever the gate says.

Example:
    >>> from vera_env import VeraEnv
    >>> from vera_env.wrappers import EmissionGate
    >>> env = EmissionGate(VeraEnv("builtin", max_steps=10))
"""

from __future__ import annotations

import gymnasium as gym

from vera_env.env import vera_base
from vera_env.observation.state import AnalysisState

__all__ = ["GATE_NUDGE", "EmissionGate", "leaf_verified"]

GATE_NUDGE = ("no leaf node of your analysis has a check that passed and discriminates "
              "(fails on mutated data). Add a check that verifies the result you are about "
              "to report from the data, then give the answer again")


def leaf_verified(state: AnalysisState) -> bool:
    """Whether some leaf node has a passing (and not non-discriminating) check."""
    return any(check.earns for node in state.leaves() for check in node.checks)


class EmissionGate(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Withhold answers that no verified leaf supports, while budget remains.

    Args:
        env: A ``VeraEnv``, possibly wrapped.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        super().__init__(env)
        vera_base(self.env).add_answer_gate(self._gate)

    @staticmethod
    def _gate(state: AnalysisState) -> str:
        return "" if leaf_verified(state) else GATE_NUDGE

    def close(self) -> None:
        vera_base(self.env).remove_answer_gate(self._gate)
        super().close()
