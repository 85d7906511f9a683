"""Text spaces that really contain what the environment emits and accepts.

``gymnasium.spaces.Text`` checks every character against a finite charset, and the
default charset is alphanumeric: an observation with a newline, a ``$`` or a ``µ`` would
fall outside its own space, and ``check_env`` would be right to complain. Observations
and actions here are arbitrary Unicode text (tool output, model turns), so this space
accepts any ``str`` up to ``max_length`` characters. It subclasses ``Text`` so that
Gymnasium's vector utilities (batching, iteration, empty arrays) treat it as text.

Sampling mixes protocol fragments with random printable text, so ``action_space.sample()``
sometimes produces well-formed turns and sometimes garbage — a fuzzer, not noise.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Text

__all__ = ["FreeText"]

_FRAGMENTS = (
    "<command>", "</command>", "ls -la", "wc -l data.csv", "echo hi", "cat missing.txt",
    "\nNODE kind=load summary=\"loaded\" artifact=data.csv",
    "\nNODE kind=qc summary=\"x\" parents=n1", "\nNODE kind=bogus",
    "\nCHECK range \"rows\" :: test 1 -eq 1 && echo True || echo False",
    "\nCHECK type \"t\" :: echo 42", "\nCHECK range \"no sentinel\" echo True",
    "\nFINAL ANSWER: ", "42", "<node kind=qc>", "<think>", "</think>", "```", "\n",
)
_PRINTABLE = string.printable + "µ→é…"


class FreeText(Text):
    """Any string of at most ``max_length`` characters.

    Args:
        max_length: Longest string the space contains.
        seed: Seed of the sampler.
    """

    def __init__(self, max_length: int, *, seed: int | np.random.Generator | None = None):
        super().__init__(max_length=max_length, min_length=0, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for any ``str`` no longer than ``max_length``."""
        return isinstance(x, str) and len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """A random turn: protocol fragments interleaved with printable noise."""
        if mask is not None or probability is not None:
            raise ValueError("FreeText.sample takes no mask or probability")
        rng = self.np_random
        pieces: list[str] = []
        for _ in range(int(rng.integers(0, 8))):
            if rng.random() < 0.6:
                pieces.append(_FRAGMENTS[int(rng.integers(len(_FRAGMENTS)))])
            else:
                n = int(rng.integers(1, 24))
                pieces.append("".join(_PRINTABLE[i] for i in rng.integers(len(_PRINTABLE), size=n)))
        return "".join(pieces)[: self.max_length]

    def __repr__(self) -> str:
        return f"FreeText(max_length={self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, FreeText) and other.max_length == self.max_length
