"""One episode's variants and shadows, per task file, within a count and a disk budget.

Strength testing varies a task file only when a check needs it, and then keeps what it
built for the rest of the episode: the variant files (``variants``, one pass) and,
when a check reads the model's files, the shadow group that replays the episode on
each variant (``shadows``). Both are per episode — a cache in a module global, keyed by
workspace, outlives its episode and leaks between them — and both are bounded, because a model that
writes a gigabyte per command must not turn strength into a disk filler on the host:

* at most ``StrengthConfig.max_shadows`` shadow workspaces (twins aside), and
* at most ``StrengthConfig.max_shadow_mb`` of disk for variant files and replays together.

When a new group would break a bound, the least recently used task files not in use
are dropped whole — variants, shadows, twins — so the variants of one file always
share one history (a rebuilt file is rebuilt with all its siblings). A check that
needs a group while every shadow is held by other checks waits, until the deadline.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.sandbox import CappedArea
from vera_env.verification.strength.inodes import discard_pool
from vera_env.verification.strength.outcome import Outcome, StrengthDeadline, TimeLeft
from vera_env.verification.strength.shadows import ShadowGroup
from vera_env.verification.strength.variants import (
    Settings,
    VariantSet,
    build_variants,
    decoded_contents,
)

if TYPE_CHECKING:
    from vera_env.sandbox import Sandbox
    from vera_env.verification.rewards import StrengthConfig
    from vera_env.verification.strength.reference import Contents
    from vera_env.verification.strength.task import StrengthTask

__all__ = ["Target", "TargetBank"]



@dataclass
class Target:
    """What the episode keeps for one task file.

    Attributes:
        variants: Its controls and mutants on disk.
        group: Their shadow workspaces, once a check needed the replay.
        in_use: Checks now testing against it (it is not dropped meanwhile).
    """

    variants: VariantSet
    group: ShadowGroup | None = None
    in_use: int = 0

    @property
    def bytes(self) -> int:
        """Disk it takes: variant files and replays."""
        return self.variants.bytes_written + (self.group.bytes if self.group else 0)

    @property
    def shadows(self) -> int:
        """Shadow workspaces alive for it."""
        return self.group.count if self.group else 0


class TargetBank:
    """The episode's targets, built on demand (see the module docstring).

    Args:
        sandbox: The episode's sandbox (shadows use its backend and limits).
        task: The task's files, reference and cache key (classifies the variants).
        scratch: Makes the harness's private directory for variant files (called once).
        stat_of: name -> (mtime_ns, mode) of the staged task file, given to every variant.
        config: The strength settings.
    """

    def __init__(self, sandbox: Sandbox, task: StrengthTask, scratch: Callable[[], Path],
                 stat_of: Mapping[str, tuple[int, int]], config: StrengthConfig) -> None:
        self._sandbox, self._task = sandbox, task
        self._settings = Settings.of(config)
        self._area: CappedArea | None = None
        self._contents: Contents | None = None
        self._contents_lock = threading.Lock()
        self._scratch_factory: Callable[[], Path] = scratch
        self._scratch: Path | None = None
        self._stat_of, self._config = dict(stat_of), config
        self._targets: OrderedDict[str, Target] = OrderedDict()
        self._cond = threading.Condition()
        self._closed = False

    @property
    def shadows(self) -> int:
        """Shadow workspaces alive now."""
        return sum(t.shadows for t in self._targets.values())

    @property
    def bytes(self) -> int:
        """Disk the live targets take."""
        return sum(t.bytes for t in self._targets.values())

    def over_budget(self) -> bool:
        """The live targets take more than ``max_shadow_mb``, or the capped
        area the shadows are staged on is full."""
        return (self.bytes > self._config.max_shadow_mb * 2**20
                or (self._area is not None and self._area.spent()))

    def scratch(self) -> Path:
        """The harness's private directory for variant files (made on first use).

        Raises:
            SandboxError: The scratch space could not be made.
        """
        with self._cond:
            if self._scratch is None:
                self._scratch = self._scratch_factory()
            return self._scratch

    def acquire(self, name: str, time_left: TimeLeft) -> Target | Outcome:
        """Task file ``name``'s variants (built on first use), marked in use.

        Returns:
            The target, or a ``skipped`` outcome saying why there is none (an empty
            file has no mutant; a closed episode has no variants).

        Raises:
            OSError: A variant file could not be written.
            SandboxError: The scratch space could not be made.
            StrengthDeadline: The deadline passed while the variants were classified.
        """
        with self._cond:
            if self._closed:
                return Outcome("skipped", "the episode is over")
            target = self._targets.get(name)
            if target is None:
                self._evict(extra_shadows=0)
                variants = self._build(name, time_left)
                if not variants.mutants:
                    _delete(variants)
                    return Outcome("skipped", f"no mutant of {name} could be built")
                target = self._targets[name] = Target(variants)
            self._targets.move_to_end(name)
            target.in_use += 1
            return target

    def shadow_group(self, target: Target, time_left: TimeLeft) -> ShadowGroup:
        """``target``'s shadow group, staged (all variants in one pass) on first use.

        Raises:
            StrengthDeadline: Every shadow stayed held by other checks until the deadline.
            SandboxError: Staging failed (an infrastructure fault).
        """
        size = len(target.variants.controls) + len(target.variants.mutants)
        with self._cond:
            while target.group is None:
                self._evict(extra_shadows=size)
                if self.shadows + size <= self._config.max_shadows or \
                        self.shadows == 0:
                    assert self._scratch is not None
                    if self._area is None:  # one kernel-capped area for all the shadows
                        self._area = CappedArea(self._sandbox,
                                                self._config.max_shadow_mb * 2**20,
                                                self._task.sources)
                    target.group = ShadowGroup(target.variants, self._area, self._task.sources,
                                               self._scratch)
                    break
                if time_left() <= 0:
                    raise StrengthDeadline(target.variants.name)
                self._cond.wait(timeout=min(1.0, time_left()))
            return target.group

    def release(self, target: Target) -> None:
        """Mark ``target`` no longer used by the caller."""
        with self._cond:
            target.in_use -= 1
            self._cond.notify_all()

    def trim(self) -> None:
        """Drop idle targets whose replay a deadline cut, and keep within the budget."""
        with self._cond:
            for name, target in list(self._targets.items()):
                group = target.group
                if target.in_use == 0 and group is not None and any(
                        s.cut for s in (*group.shadows.values(), *group.twins.values())):
                    self._drop(name)
            self._evict(extra_shadows=0)

    def close(self) -> None:
        """Close every shadow and delete every variant file. Idempotent."""
        with self._cond:
            self._closed = True
            for name in list(self._targets):
                self._drop(name)
            if self._scratch is not None:
                discard_pool(self._scratch)
            if self._area is not None:
                self._area.close()

    def _evict(self, extra_shadows: int) -> None:
        for name, target in list(self._targets.items()):  # least recently used first
            over = self.shadows + extra_shadows > self._config.max_shadows
            if not (over or self.over_budget()):
                return
            if target.in_use == 0:
                self._drop(name)

    def _drop(self, name: str) -> None:
        target = self._targets.pop(name)
        if target.group is not None:
            target.group.close()
        _delete(target.variants)

    def _build(self, name: str, time_left: TimeLeft) -> VariantSet:
        if self._scratch is None:
            self._scratch = self._scratch_factory()
        return build_variants(name, self._task, self._settings, self._scratch,
                              budget_s=max(0.5, time_left() / 4), stamp=self._stat_of[name],
                              contents=lambda: self._decoded(time_left), time_left=time_left)

    def _decoded(self, time_left: TimeLeft) -> Contents:
        """Every task file's decoded content, once per episode (the solver's input)."""
        with self._contents_lock:
            if self._contents is None:
                self._contents = decoded_contents(
                    self._task.sources, self._settings.max_bytes,
                    max(0.5, time_left() / 4))
            return self._contents


def _delete(variants: VariantSet) -> None:
    for variant in (*variants.controls, *variants.mutants):
        variant.path.unlink(missing_ok=True)
