"""Text spaces that really contain what the environment emits and accepts.

``gymnasium.spaces.Text`` checks every character against a finite charset, and the
default charset is alphanumeric: an observation with a newline, a ``$`` or a ``µ`` would
fall outside its own space, and ``check_env`` would be right to complain. Observations
and actions here are arbitrary Unicode text (tool output, model turns), so this space
accepts any ``str`` up to ``max_length`` characters. It subclasses ``Text`` so that
Gymnasium's vector utilities (batching, iteration, empty arrays) treat it as text.

Sampling mixes protocol fragments with random printable text, so ``action_space.sample()``
sometimes produces well-formed turns and sometimes garbage — a fuzzer, not noise.

Flattening: ``Text`` flattens a string to indices into its finite charset, so Gymnasium's
``flatten`` and ``AsyncVectorEnv``'s shared memory (which flattens each observation)
raised ``KeyError: ':'`` on the first observation. ``FreeText`` flattens to Unicode code
points instead (int32, ``-1`` pads to ``max_length``; lone surrogates from undecodable
tool output survive the round trip), so ``make_vec(..., vectorization_mode="async")``
works with or without shared memory.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Box, Text
from gymnasium.spaces.utils import flatten, flatten_space, unflatten
from gymnasium.vector.utils import read_from_shared_memory

__all__ = ["FreeText", "SharedTextBatch"]

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


_PAD = -1  # code points are >= 0, so -1 marks the unused tail of a flattened string


# mypy's singledispatch check cannot match FreeText to the fallback's generic `Space[T]`
@flatten.register(FreeText)
def _flatten_free_text(space: FreeText, x: str) -> np.ndarray:  # type: ignore[misc]
    points = np.frombuffer(x.encode("utf-32-le", "surrogatepass"), dtype="<i4")
    if points.size > space.max_length:
        raise ValueError(f"string of {points.size} characters exceeds {space!r}")
    out = np.full(space.max_length, _PAD, dtype=np.int32)
    out[: points.size] = points
    return out


@unflatten.register(FreeText)  # (as for flatten)
def _unflatten_free_text(space: FreeText, x: np.ndarray) -> str:  # type: ignore[misc]
    points = np.asarray(x, dtype="<i4")
    return points[points >= 0].tobytes().decode("utf-32-le", "surrogatepass")


@flatten_space.register(FreeText)
def _flatten_space_free_text(space: FreeText) -> Box:
    return Box(low=_PAD, high=0x10FFFF, shape=(space.max_length,), dtype=np.int32)


class SharedTextBatch(Sequence[str]):
    """A live view of ``n`` strings in an ``AsyncVectorEnv`` shared-memory buffer.

    Gymnasium reads a shared buffer once, at construction, and relies on numpy views
    seeing later writes. A tuple of ``str`` decoded at construction never changes, so
    every observation would be the first one (for ``Text`` too). This view decodes on
    access; ``AsyncVectorEnv(copy=True)`` (the default) deep-copies it into a plain
    tuple of ``str`` at each step, as it copies array views.
    """

    def __init__(self, space: FreeText, shared_memory: Any, n: int) -> None:
        self._space = space
        self._rows = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape(
            n, space.max_length)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        return _unflatten_free_text(self._space, self._rows[index])

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@read_from_shared_memory.register(FreeText)
def _read_free_text_from_shared_memory(space: FreeText, shared_memory: Any,
                                       n: int = 1) -> SharedTextBatch:
    return SharedTextBatch(space, shared_memory, n)
