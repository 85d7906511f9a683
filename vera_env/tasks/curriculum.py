"""A curriculum: a task source that serves the bands a policy is learning on.

Why. A GRPO group whose episodes are all right or all wrong has zero advantage and
teaches nothing; a small model on trapped tasks is all wrong, and wastes every rollout.
DAPO and prime-rl filter such groups online; this source goes one step earlier and
avoids drawing them. It groups task ids into *bands* -- (type, difficulty), e.g.
``("seq.gc_content", "warmup")`` -- keeps each band's pass rate over its last
``window`` finished episodes, and draws from the bands whose rate lies in the open
interval ``(low, high)`` (informative) or that it has not measured yet.

Every type climbs its own ladder (``warmup`` -> ``easy`` -> ``medium`` -> ``hard`` by
default): it starts on the first rung; a rung whose rate reaches ``high`` over at least
``min_episodes`` is mastered and the type moves up; a rung whose rate falls to ``low``
(collapses towards all-wrong) moves it back down, and both rungs forget their record, so
that climbing again must be re-earned with fresh episodes (no oscillation on old data).
Rungs below a type's current one are drawn only while their record is informative; a
current rung that is not (all wrong on the first rung, all right on the last) keeps a
small ``floor`` weight, so that it is still measured. A warm start (``start``) puts every
type on a higher rung from the outset -- for a policy that already solves the lower ones,
whose episodes there would be all right and teach nothing; the rungs it skips have no
record and are not drawn unless a fall sends the type back to them.

Outcomes arrive through ``update`` -- called by ``VeraEnv`` at the end of every episode
(`vera_env.tasks.source.OutcomeListener`); environments learn together only when they
share one instance (``EnvSpec.build(tasks=curriculum)``, as ``vera_env.training.envs`` does),
while each env built from the name ``curriculum`` holds its own. ``update`` and the
draws hold a lock, so threads may share it; processes may not. ``state_dict`` and
``load_state_dict`` carry the whole state, the sampling rng included, as JSON (a trainer
saves it next to its checkpoint as ``curriculum.json``): a resumed run draws the same
next ids as the run that was killed.

Example:
    >>> from vera_env.tasks.curriculum import curriculum_source
    >>> cur = curriculum_source(seeds=range(3), types=["seq.gc_content"])
    >>> cur.ladder
    ('warmup', 'easy')
    >>> cur.sample(2)
    ('seq.gc_content.warmup.s1', 'seq.gc_content.warmup.s0')
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vera_env.tasks.model import Task
from vera_env.tasks.source import TaskSource, UnknownTaskError

__all__ = ["Band", "Curriculum", "builtin_band", "curriculum_source"]

Band = tuple[str, str]
"""(type, difficulty), e.g. ``("vcf.titv", "warmup")``."""

_STATE_VERSION = 1


def builtin_band(task_id: str) -> Band:
    """The band of a builtin id: ``seq.motif_count.easy.s3`` -> (``seq.motif_count``,
    ``easy``).

    Raises:
        UnknownTaskError: Not a builtin id.
    """
    from vera_env.tasks.builtin import parse_task_id  # noqa: PLC0415 - generators on use

    task_type, difficulty, _ = parse_task_id(task_id)
    return task_type, difficulty


class Curriculum(TaskSource):
    """Serve the ids of ``base`` from the bands whose pass rates are informative.

    Args:
        base: The tasks; ``get`` is delegated to it.
        ladder: Difficulties in the order a type climbs them; ids of other difficulties
            are never drawn.
        band_of: The band of an id (default: builtin ids).
        window: Finished episodes a band's pass rate is measured over.
        min_episodes: Episodes a rung needs before it may be called mastered or collapsed.
        low: At or below it a band is too hard to teach anything (all wrong).
        high: At or above it a band is mastered (all right).
        floor: Weight of a current rung that is not informative.
        seed: Seeds the rng of ``sample``.
        start: The rung every type begins on (a type without it: its highest rung below
            it); default the first.

    Raises:
        ValueError: Bad thresholds, an empty ladder, no id of ``base`` on the ladder, or a
            ``start`` off the ladder.
    """

    def __init__(self, base: TaskSource, *, ladder: Sequence[str] = ("warmup", "easy"),
                 band_of: Callable[[str], Band] = builtin_band, window: int = 32,
                 min_episodes: int = 8, low: float = 0.1, high: float = 0.9,
                 floor: float = 0.1, seed: int = 0, start: str | None = None) -> None:
        if not 0 <= low < high <= 1 or not 0 < floor <= 1:
            raise ValueError(f"need 0 <= low < high <= 1 and 0 < floor <= 1, got "
                             f"low={low}, high={high}, floor={floor}")
        if not 1 <= min_episodes <= window:
            raise ValueError(f"need 1 <= min_episodes <= window, got {min_episodes}, {window}")
        if not ladder or len(set(ladder)) != len(ladder):
            raise ValueError(f"the ladder must name distinct difficulties, got {list(ladder)}")
        if start is not None and start not in ladder:
            raise ValueError(f"start {start!r} is not on the ladder {list(ladder)}")
        super().__init__(name=f"curriculum({base.name})", ids=base.ids(), factory=base.get)
        self.base, self.ladder, self._band_of = base, tuple(ladder), band_of
        self.window, self.min_episodes, self.low, self.high = window, min_episodes, low, high
        self.floor = floor
        self._members: dict[Band, list[str]] = {}
        for task_id in base.ids():
            band = band_of(task_id)
            if band[1] in self.ladder:
                self._members.setdefault(band, []).append(task_id)
        if not self._members:
            raise ValueError(f"no id of {base.name} is on the ladder {list(self.ladder)}")
        self._rungs: dict[str, tuple[Band, ...]] = {}
        for band in sorted(self._members, key=lambda b: (b[0], self.ladder.index(b[1]))):
            self._rungs[band[0]] = (*self._rungs.get(band[0], ()), band)
        top = self.ladder.index(start) if start is not None else 0
        self._level = {t: max(i for i, band in enumerate(rungs)
                              if i == 0 or self.ladder.index(band[1]) <= top)
                       for t, rungs in self._rungs.items()}
        self._outcomes: dict[Band, deque[bool]] = {b: deque(maxlen=window)
                                                   for b in self._members}
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()

    # ----- what is served -----

    def level(self, task_type: str) -> str:
        """The difficulty ``task_type`` is currently on."""
        return self._rungs[task_type][self._level[task_type]][1]

    def pass_rate(self, band: Band) -> float | None:
        """The band's pass rate over its window (None before any outcome)."""
        record = self._outcomes[band]
        return sum(record) / len(record) if record else None

    def weights(self) -> dict[Band, float]:
        """Each band's sampling weight now (bands above a type's rung weigh 0)."""
        with self._lock:
            return self._weights()

    def pick(self, rng: np.random.Generator) -> Task:
        """A task from a band drawn by `weights`, then uniformly within it, with ``rng``."""
        return self.get(self._draw(rng))

    def sample(self, n: int) -> tuple[str, ...]:
        """``n`` ids drawn like ``pick`` with the curriculum's own rng (part of its state):
        what a trainer building its next batch of starts calls."""
        with self._lock:
            return tuple(self._draw_locked(self._rng) for _ in range(n))

    def _draw(self, rng: np.random.Generator) -> str:
        with self._lock:
            return self._draw_locked(rng)

    def _draw_locked(self, rng: np.random.Generator) -> str:
        bands, weights = zip(*self._weights().items(), strict=True)
        p = np.asarray(weights, dtype=float)
        members = self._members[bands[int(rng.choice(len(bands), p=p / p.sum()))]]
        return members[int(rng.integers(len(members)))]

    def _weights(self) -> dict[Band, float]:
        out: dict[Band, float] = {}
        for task_type, rungs in self._rungs.items():
            for index, band in enumerate(rungs):
                if index > self._level[task_type]:
                    break
                informative = self._informative(band, below=index < self._level[task_type])
                out[band] = (1.0 if informative else
                             self.floor if index == self._level[task_type] else 0.0)
        return out

    def _informative(self, band: Band, *, below: bool = False) -> bool:
        """Worth drawing: unmeasured, or a rate strictly between ``low`` and ``high``. A
        rung ``below`` a type's current one counts only once measured: a climb leaves it
        measured, so an unmeasured one was skipped by a warm start."""
        measured = len(self._outcomes[band]) >= self.min_episodes
        if not measured:
            return not below
        rate = self.pass_rate(band)
        return rate is not None and self.low < rate < self.high

    # ----- what is learned -----

    def update(self, task_id: str, correct: bool | None) -> bool:
        """Record a finished episode and move its type up or down the ladder.

        Args:
            task_id: The episode's task.
            correct: Graded correct; None (unscorable) is ignored.

        Returns:
            Whether it was recorded: False for None and for ids off the ladder.
        """
        if correct is None:
            return False
        try:
            band = self._band_of(task_id)
        except UnknownTaskError:
            return False
        if band not in self._outcomes:
            return False
        with self._lock:
            self._outcomes[band].append(bool(correct))
            self._climb(band)
        return True

    def _climb(self, band: Band) -> None:
        task_type = band[0]
        rungs, level = self._rungs[task_type], self._level[task_type]
        record = self._outcomes[band]
        if band != rungs[level] or len(record) < self.min_episodes:
            return
        rate = sum(record) / len(record)
        if rate >= self.high and level + 1 < len(rungs):
            self._level[task_type] = level + 1
        elif rate <= self.low and level > 0:
            self._level[task_type] = level - 1
            record.clear()
            self._outcomes[rungs[level - 1]].clear()

    # ----- checkpointing -----

    def state_dict(self) -> dict[str, Any]:
        """The whole state as JSON-serialisable data (``json.dumps`` takes it as is)."""
        with self._lock:
            return {"version": _STATE_VERSION, "ladder": list(self.ladder),
                    "levels": dict(self._level),
                    "outcomes": {f"{t}|{d}": [int(x) for x in record]
                                 for (t, d), record in self._outcomes.items()},
                    "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict`` taken from a curriculum over the same bands.

        Raises:
            ValueError: Another version, ladder or set of bands.
        """
        outcomes = {tuple(key.split("|", 1)): value for key, value in state["outcomes"].items()}
        if (state.get("version") != _STATE_VERSION or list(state["ladder"]) != list(self.ladder)
                or set(outcomes) != set(self._outcomes) or set(state["levels"]) != set(self._level)
                or any(not 0 <= int(v) < len(self._rungs[t]) for t, v in state["levels"].items())):
            raise ValueError("curriculum state is from another curriculum (version, ladder, "
                             "bands or levels differ); refusing to resume on it")
        with self._lock:
            self._level = {t: int(v) for t, v in state["levels"].items()}
            for band, values in outcomes.items():
                self._outcomes[(band[0], band[1])] = deque((bool(v) for v in values),
                                                           maxlen=self.window)
            self._rng.bit_generator.state = state["rng"]

    def __repr__(self) -> str:
        levels = ", ".join(f"{t}={self.level(t)}" for t in self._rungs)
        return f"Curriculum({self.base.name!r}: {levels})"


def curriculum_source(seeds: Sequence[int] = range(1000), types: Sequence[str] | None = None,
                      difficulties: Sequence[str] = ("easy",), seed: int = 0,
                      start: str | None = None) -> Curriculum:
    """The source behind the name ``curriculum``: builtin ids of every type (or
    ``types``) at ``seeds``, on a ladder that starts at ``warmup`` and climbs the given
    ``difficulties`` in order of size (default: warmup, easy); every type begins on
    ``start`` (default ``warmup``; see `Curriculum`).

    Raises:
        UnknownTaskError: An unknown type or difficulty.
    """
    from vera_env.tasks.builtin import ALL_DIFFICULTIES, builtin_source  # noqa: PLC0415

    wanted = {"warmup", *difficulties}
    unknown = wanted - set(ALL_DIFFICULTIES)
    if unknown:
        raise UnknownTaskError(f"unknown difficulties {sorted(unknown)}; expected some of "
                               f"{list(ALL_DIFFICULTIES)}")
    ladder = tuple(d for d in ALL_DIFFICULTIES if d in wanted)
    return Curriculum(builtin_source(ladder, seeds, types), ladder=ladder, seed=seed,
                      start=start)
