"""A task source: the ordered collection of tasks an environment draws from.

Kept apart from the loaders so that the task families (builtin, BioMysteryBench, ...)
can build a source without importing the loader that dispatches to them.

Why `OutcomeListener` is a protocol the env checks for. A source that adapts what it
serves to how episodes end (`vera_env.tasks.curriculum.Curriculum`) needs every finished
episode's verdict, whoever drives the env: ``vera_env.training.scripts.grpo``,
``vera_env.training.scripts.collect``, a Ray worker or a user's loop. Reporting it from
``VeraEnv.step`` when the source listens gives all of them the hook without code of their
own; a source that does not listen costs one ``isinstance``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from vera_env.errors import UnknownTaskError
from vera_env.tasks.model import Task

__all__ = ["OutcomeListener", "TaskSource", "UnknownTaskError"]


@runtime_checkable
class OutcomeListener(Protocol):
    """A task source told how each episode it served ended (``VeraEnv`` reports it)."""

    def update(self, task_id: str, correct: bool | None) -> bool:
        """Record one finished episode.

        Args:
            task_id: The episode's task.
            correct: Its final answer graded correct (False also when the budget ran out
                without one); None when the outcome is unscorable (a sandbox or grader
                fault), which must not count either way.

        Returns:
            Whether the outcome was recorded.
        """


class TaskSource:
    """An ordered collection of tasks the env draws from.

    Tasks may be held ready or made on demand by a ``factory`` (builtin families regenerate
    any valid id, not only the listed ones).

    Args:
        tasks: Ready tasks, in order.
        name: Where the tasks came from, for error messages.
        ids: Ids listed in addition to ``tasks``, made by ``factory`` when first asked.
        factory: Makes a task from an id, or raises `UnknownTaskError`.
    """

    def __init__(self, tasks: Iterable[Task] = (), *, name: str = "tasks",
                 ids: Sequence[str] = (), factory: Callable[[str], Task] | None = None) -> None:
        self.name = name
        self._made: dict[str, Task] = {}
        for task in tasks:
            if not isinstance(task, Task):
                raise TypeError(f"expected Task objects, got {type(task).__name__}")
            if task.id in self._made:
                raise ValueError(f"duplicate task id {task.id!r} in {name}")
            self._made[task.id] = task
        self._ids = tuple(self._made) + tuple(i for i in ids if i not in self._made)
        if len(set(self._ids)) != len(self._ids):
            raise ValueError(f"duplicate task ids in {name}")
        if ids and factory is None:
            raise ValueError("ids listed without a factory to make them")
        self._factory = factory

    def ids(self) -> tuple[str, ...]:
        """The listed task ids, in order."""
        return self._ids

    def ready(self) -> tuple[Task, ...]:
        """The tasks held ready, in order (not those the factory would still make)."""
        return tuple(self._made.values())

    def get(self, task_id: str) -> Task:
        """The task with this id.

        Raises:
            UnknownTaskError: The id is neither listed nor one the factory can make; the
                message shows a few ids that exist.
        """
        if task_id in self._made:
            return self._made[task_id]
        if self._factory is not None:
            try:
                task = self._factory(task_id)
            except UnknownTaskError as exc:
                raise UnknownTaskError(f"{exc} Known ids include: {self._preview()}") from None
            self._made[task_id] = task
            return task
        raise UnknownTaskError(f"no task {task_id!r} in {self.name} "
                               f"({len(self)} tasks); known ids include: {self._preview()}")

    def pick(self, rng: np.random.Generator) -> Task:
        """A listed task drawn uniformly with ``rng`` (reproducible for a seeded rng)."""
        if not self._ids:
            raise UnknownTaskError(f"{self.name} has no tasks to pick from")
        return self.get(self._ids[int(rng.integers(len(self._ids)))])

    def _preview(self, n: int = 5) -> str:
        shown = ", ".join(repr(i) for i in self._ids[:n])
        return shown + (", ..." if len(self._ids) > n else "")

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[Task]:
        return (self.get(task_id) for task_id in self._ids)

    def __repr__(self) -> str:
        return f"TaskSource({self.name!r}, {len(self)} tasks)"
