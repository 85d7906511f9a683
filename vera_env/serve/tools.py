"""``VeraToolEnv``: a served environment as TRL's ``environment_factory`` expects one.

TRL's ``GRPOTrainer(environment_factory=...)`` builds one object per rollout slot,
calls ``reset(**dataset_row)`` before generation (its returned string is appended to
the prompt), exposes every public method as a tool the model calls, and, when the
object has ``get_reward()``, uses it as a reward. This class is that object over a
``vera-env serve --protocol openenv`` server: the row names the task (``task_id``, or
``split`` and ``index``; ``seed``), and the one tool, ``turn(text)``, takes the model's
raw turn — the same text the Gymnasium env takes — so nothing about the wire format
changes between in-process training and this one. It imports nothing from TRL.

``get_reward`` is the episode's return; ``nan`` when the episode was unscorable (an
infrastructure fault: TRL turns a non-finite reward into an ignored one rather than a
0 that would corrupt the group's advantages).
"""

from __future__ import annotations

import math
from typing import Any

from vera_env import info as keys
from vera_env.serve.client import VeraRemoteEnv

__all__ = ["VeraToolEnv"]

_OVER = "\n\n[The episode is over: no further turn is scored.]"


class VeraToolEnv:
    """One rollout's environment for TRL (``environment_factory=lambda: VeraToolEnv(url)``).

    Args:
        base_url: The ``vera-env serve --protocol openenv`` server.
        **client: ``VeraRemoteEnv`` options (``token``, ``message_timeout_s``, ...).
    """

    def __init__(self, base_url: str, **client: Any) -> None:
        self._env = VeraRemoteEnv(base_url, **client)
        self._return: float = 0.0
        self._done = False
        self.info: dict[str, Any] = {}

    def reset(self, **row: Any) -> str:
        """Start the episode a dataset row names; returns the first observation.

        Args:
            **row: The dataset row; ``task_id``, or ``split`` and ``index``, and ``seed``
                are read, other columns (the prompt, metadata) are ignored.
        """
        options = {k: row[k] for k in ("task_id", "split", "index") if row.get(k) is not None}
        seed = row.get("seed")
        obs, self.info = self._env.reset(seed=None if seed is None else int(seed),
                                         options=options or None)
        self._return, self._done = 0.0, False
        return obs

    def turn(self, text: str) -> str:
        """Take one turn in the data-analysis workspace and see what happened.

        Args:
            text: Your raw turn: a <command>shell command</command>, a NODE line with
                CHECK lines the harness runs, and/or a line FINAL ANSWER: <answer>.
        """
        if self._done:
            return "The episode is over." + _OVER
        obs, reward, terminated, truncated, self.info = self._env.step(text)
        self._return += reward  # nan once unscorable: it stays nan
        self._done = terminated or truncated
        return obs + (_OVER if self._done else "")

    def get_reward(self) -> float:
        """The episode's return; ``nan`` if an infrastructure fault made it unscorable."""
        if self.info.get(keys.UNSCORABLE):
            return math.nan
        return self._return

    def _close(self) -> None:
        """Close the session (leading underscore: not a tool)."""
        self._env.close()
