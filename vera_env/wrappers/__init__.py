"""Wrappers that change one thing each about a ``VeraEnv`` episode.

``ForcedAnswer`` demands an answer at the end of the budget, ``EmissionGate`` withholds
answers nothing verified, ``RecordEpisode`` writes each episode to disk. They are plain
``gymnasium.Wrapper``s: they compose in either order with each other and with
Gymnasium's own wrappers, and talk to the base environment only through its public
methods (``phase``, ``force_answer``, ``grant_extra_ask``, ``add_answer_gate``,
``state``, ``steps_left``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from vera_env.wrappers.emission_gate import EmissionGate
from vera_env.wrappers.forced_answer import ForcedAnswer
from vera_env.wrappers.record import RecordEpisode

__all__ = ["WRAPPER_NAMES", "EmissionGate", "ForcedAnswer", "RecordEpisode", "apply_wrappers"]

_BUILDERS: dict[str, Callable[[Any], Any]] = {
    "forced": ForcedAnswer,
    "gate": EmissionGate,
}
WRAPPER_NAMES = tuple(_BUILDERS)


def apply_wrappers(env: Any, names: Sequence[str]) -> Any:
    """Wrap ``env`` with the named wrappers (``forced``, ``gate``), innermost first.

    Raises:
        ValueError: An unknown wrapper name.
    """
    for name in names:
        if name not in _BUILDERS:
            raise ValueError(f"unknown wrapper {name!r}; expected one of {sorted(_BUILDERS)}")
        env = _BUILDERS[name](env)
    return env
