"""Where episodes start: a task id and a reset seed, and the dataset rows that carry them.

GRPO's dataset is task starts, not prompts: the trainer's own model plays each start in
the environment (``vera_env.training.lockstep``), so a dataset row only has to say which
task and which seed. TRL hands a row's ``prompt`` to the rollout untouched, so a start
travels as JSON in that column (``format_start``, read back by ``parse_start``). A start
may also leave its task to be drawn when it is played (``deferred_starts``): a
``Curriculum`` picks from the pass rates of the episodes before it, which a dataset
built up front cannot know.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vera_env.tasks import Curriculum

if TYPE_CHECKING:
    from vera_env.tasks import TaskSource

__all__ = ["DRAWN", "Start", "build_dataset", "deferred_starts", "draw_starts", "format_start",
           "parse_start"]


@dataclass(frozen=True, slots=True)
class Start:
    """Where an episode starts: the task and the reset seed."""

    task_id: str
    seed: int


def draw_starts(task_ids: Sequence[str], n: int, *, seed: int = 0) -> list[Start]:
    """``n`` starts: task ids without replacement while they last, then reshuffled again.

    Raises:
        ValueError: ``n`` < 1 or no task ids.
    """
    if n < 1:
        raise ValueError(f"need at least one start, got n={n}")
    if not task_ids:
        raise ValueError("no task ids to draw from")
    rng = np.random.default_rng(seed)
    order: list[str] = []
    while len(order) < n:
        order.extend(task_ids[i] for i in rng.permutation(len(task_ids)))
    return [Start(task_id=t, seed=int(rng.integers(2**31))) for t in order[:n]]


DRAWN = "drawn:"
"""Task-id prefix of a start whose task is drawn when it is played, not when the dataset
is built: a ``Curriculum`` picks from the pass rates of the episodes before it, which a
dataset built up front cannot know (``deferred_starts``, ``LockstepRollout``)."""


def deferred_starts(n: int, *, seed: int = 0) -> list[Start]:
    """``n`` starts whose tasks are drawn when played (ids ``drawn:0`` ...), with seeds.

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"need at least one start, got n={n}")
    rng = np.random.default_rng(seed)
    return [Start(task_id=f"{DRAWN}{i}", seed=int(rng.integers(2**31))) for i in range(n)]


def format_start(start: Start) -> str:
    """The dataset ``prompt`` of an episode: its start, as JSON (the rollout sees only it)."""
    return json.dumps({"task_id": start.task_id, "seed": start.seed})


def parse_start(prompt: Any) -> Start:
    """Read a ``format_start`` prompt back.

    Raises:
        ValueError: The prompt was not written by ``format_start`` (a dataset built by hand
            with ordinary prompts: use ``build_dataset``).
    """
    try:
        data = json.loads(prompt)
        return Start(task_id=str(data["task_id"]), seed=int(data["seed"]))
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"expected a prompt written by format_start, e.g. "
                         f"'{{\"task_id\": \"seq.gc_content.easy.s0\", \"seed\": 0}}'; "
                         f"got {str(prompt)[:80]!r}") from exc


def build_dataset(tasks: TaskSource, num_prompts: int, *, seed: int = 0) -> Any:
    """A ``datasets.Dataset`` of task starts: columns ``prompt``, ``task_id``, ``seed``.

    Draws without replacement while the source lasts, then cycles through reshuffles
    (``draw_starts``). Pass
    ``vera_env.tasks.builtin.builtin_source(seeds=range(n))`` for ``n`` fresh builtin
    instances of every type. A ``Curriculum``'s starts are drawn when they are played
    (``deferred_starts``), from the pass rates seen so far.
    """
    from datasets import Dataset  # noqa: PLC0415

    starts = (deferred_starts(num_prompts, seed=seed) if isinstance(tasks, Curriculum)
              else draw_starts(list(tasks.ids()), num_prompts, seed=seed))
    return Dataset.from_dict({"prompt": [format_start(s) for s in starts],
                              "task_id": [s.task_id for s in starts],
                              "seed": [s.seed for s in starts]})
