"""Wrappers that change one thing each about a ``VeraEnv`` episode.

``ForcedAnswer`` demands an answer at the end of the budget, ``EmissionGate`` withholds
answers nothing verified, ``RecordEpisode`` writes each episode to disk. They are plain
``gymnasium.Wrapper``s: they compose in either order with each other and with
Gymnasium's own wrappers, and talk to the base environment only through its public
settings and seams (``forced_reserve``, ``require_verified_leaf``, ``state``). They
switch; the env holds every rule and renders every observation, so either order gives
the same episode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args

import gymnasium as gym

from vera_env.wrappers.emission_gate import EmissionGate
from vera_env.wrappers.forced_answer import ForcedAnswer
from vera_env.wrappers.record import RecordEpisode

__all__ = ["DEFAULT_WRAPPERS", "WRAPPERS", "WRAPPERS_HELP", "WRAPPER_NAMES", "EmissionGate",
           "ForcedAnswer", "RecordEpisode", "WrapperName", "apply_wrappers", "parse_wrapper_names"]

WrapperName = Literal["forced", "gate"]
"""The wrappers that can be named in an ``EnvSpec``, on the command line or in a golden
scenario. ``RecordEpisode`` is not among them: it needs a folder, chosen by the caller."""
WRAPPER_NAMES: tuple[WrapperName, ...] = get_args(WrapperName)
DEFAULT_WRAPPERS: tuple[WrapperName, ...] = ("gate", "forced")
"""The wrappers of an ``EnvSpec`` and of every command that builds one, innermost first:
``ForcedAnswer(EmissionGate(env))``, so a forced answer is not held back by the gate."""

WRAPPERS_HELP = (f"comma list of wrapper names, innermost first (gate: EmissionGate, "
                 f"forced: ForcedAnswer; gate,forced is ForcedAnswer around EmissionGate); "
                 f"'none' for the bare environment (default: {','.join(DEFAULT_WRAPPERS)})")
"""The ``--wrappers`` help of every command, so each states the order the same way."""

WRAPPERS: Mapping[WrapperName, Callable[..., gym.Wrapper]] = {
    "forced": ForcedAnswer,
    "gate": EmissionGate,
}
"""The one table of wrapper names (the CLI, ``EnvSpec``, golden scenarios, training)."""


def apply_wrappers(env: gym.Env, names: Sequence[str],
                   options: Mapping[str, Mapping[str, Any]] | None = None) -> gym.Env:
    """Wrap ``env`` with the named wrappers, innermost first.

    Args:
        env: The environment.
        names: Wrapper names (``WRAPPER_NAMES``), innermost first.
        options: Keyword arguments per wrapper name, e.g. ``{"forced": {"reserve": 2}}``.

    Raises:
        ValueError: An unknown wrapper name.
    """
    options = options or {}
    for name in names:
        if name not in WRAPPERS:
            raise ValueError(f"unknown wrapper {name!r}; expected one of {list(WRAPPER_NAMES)}")
        env = WRAPPERS[name](env, **options.get(name, {}))  # type: ignore[index]
    return env


def parse_wrapper_names(text: str) -> tuple[WrapperName, ...]:
    """``"forced,gate"`` -> ``("forced", "gate")``; ``""`` or ``"none"`` -> ``()``.

    Raises:
        ValueError: An unknown or repeated wrapper name.
    """
    if text.strip().lower() in ("", "none"):
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in WRAPPER_NAMES]
    if unknown:
        raise ValueError(f"unknown wrapper(s) {unknown}; expected a comma list of "
                         f"{list(WRAPPER_NAMES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"each wrapper may appear once, got {list(names)}")
    return names  # type: ignore[return-value]
