"""The attack battery: policies that seek verification without doing the analysis.

Why in the package. A verification reward is only as good as the hacks it refuses, and
the hacks that matter are the ones a task's own data admits: a column the question
reads, a sentinel, an id field. So ``vera-env tasks audit`` plays this battery against
any suite, and ``benchmarks/reward_ranking.py`` measures the builtin and real types with
the same policies. Each is task-blind: it may read the workspace's files (and the
task's files on the host, to compute what it pins: a pin that fails on the real
workspace proves nothing) but never the question or the answer. The exception is
named: the gated recounts replay the task's own reference, gated, to show that shaping
a verdict does not pay.

A policy is a builder ``build(task, look) -> turns``: the first turn is always played
first (a look, for the blind ones); ``look`` is that command's output once the
environment has run it ("" before), so a policy may adapt to what it saw, as
``inode_detector`` does. ``AttackPolicy`` plays a builder through the environment.

``BLIND`` policies are judged against the no-analysis cap; ``SHAPED`` ones against what
their honest twin, ``first_checks`` (the ``BASELINE``), earns on the same task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from vera_env import info as keys
from vera_env.evaluation.attacks.blind import (
    coin_nodes,
    content_pins,
    copy_compare,
    derived_pins,
    fingerprint_pins,
    host_look,
    inode_detector,
    repeated_checks,
)
from vera_env.evaluation.attacks.gated import (
    first_checks,
    gated_error,
    gated_recount_error,
    gated_recount_true,
    gated_true,
)
from vera_env.evaluation.attacks.targeted import (
    column_stats,
    slices,
    snapshot_macro,
    targeted_hashes,
    unread_fields,
)
from vera_env.evaluation.attacks.turns import ANSWER
from vera_env.tasks import Task

__all__ = ["ANSWER", "BASELINE", "BLIND", "POLICIES", "SHAPED", "AttackPolicy", "Builder",
           "NoAnalysisPolicy", "coin_nodes", "column_stats", "content_pins", "copy_compare",
           "derived_pins", "describe", "fingerprint_pins", "first_checks", "gated_error",
           "gated_recount_error", "gated_recount_true", "gated_true", "host_look",
           "inode_detector", "repeated_checks", "slices", "snapshot_macro",
           "targeted_hashes", "unread_fields"]


class Builder(Protocol):
    """``build(task, look)``: the whole script, the look first (see the module docstring)."""

    def __call__(self, task: Task, look: str = "") -> list[str]: ...


BLIND: dict[str, Builder] = {
    "fingerprint_pins": fingerprint_pins, "content_pins": content_pins,
    "derived_pins": derived_pins, "copy_compare": copy_compare,
    "repeated_checks": repeated_checks, "coin_nodes": coin_nodes,
    "inode_detector": inode_detector, "targeted_hashes": targeted_hashes,
    "slices": slices, "unread_fields": unread_fields, "gated_error": gated_error,
    "gated_true": gated_true, "snapshot_macro": snapshot_macro, "column_stats": column_stats,
}
"""The no-analysis policies, by the name reports use."""

SHAPED: dict[str, Builder] = {
    "gated_recount_error": gated_recount_error, "gated_recount_true": gated_recount_true,
}
"""The task's reference with its verdicts shaped: needs ``Task.solution``."""

BASELINE = "first_checks"
"""The shaped policies' honest twin, played wherever one of them is."""

POLICIES: dict[str, Builder] = {**BLIND, **SHAPED, BASELINE: first_checks}
"""The whole battery, and the twin."""


def describe(name: str) -> str:
    """The first line of a policy's docstring: what it tries."""
    return (POLICIES[name].__doc__ or name).strip().splitlines()[0]


class AttackPolicy:
    """Plays a builder through the environment (``vera_env.policy.Policy``).

    The first turn is played first; the rest of the script is built once its output is
    seen, so an adaptive builder (``inode_detector``) reads the real workspace.

    Args:
        build: The policy's builder.
        tasks: Looks tasks up by id (a ``TaskSource``, or a mapping).
    """

    def __init__(self, build: Builder, tasks: Mapping[str, Task] | Any) -> None:
        self._build, self._tasks = build, tasks
        self._script: list[str] | None = None

    def begin_episode(self, info: dict[str, Any]) -> None:
        """A new episode: forget the last one's script."""
        self._script = None

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The first turn at step 0, then the script built from its output."""
        task = self._task(info[keys.TASK_ID])
        step = int(info[keys.STEP])
        if step == 0:
            return self._build(task, "")[0]
        if self._script is None:
            self._script = self._build(task, str(info.get(keys.COMMAND_OUTPUT, "")))
        return self._script[step] if step < len(self._script) else ANSWER

    def _task(self, task_id: str) -> Task:
        if isinstance(self._tasks, Mapping):
            return self._tasks[task_id]
        task: Task = self._tasks.get(task_id)
        return task


NoAnalysisPolicy = AttackPolicy
"""The name ``benchmarks/reward_ranking.py`` and older tests use."""
