"""What strength knows of an episode's task, fixed once at reset.

Every strength module that classifies variants needs the same four things of the task:
its files, its reference (how the answer follows from them), whether two answers agree
under its grader, and the name the per-process caches key it by. They are gathered once,
by the episode that opens its strength state (``vera_env.episode.open_strength``), and
handed down as one frozen record instead of four arguments through every layer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from vera_env.verification.strength.reference import Reference

__all__ = ["Same", "StrengthTask"]

Same = Callable[[str, str], bool]
"""Whether two answers agree under the task's grader."""


@dataclass(frozen=True, slots=True)
class StrengthTask:
    """The task as strength sees it.

    Attributes:
        sources: The task's files (workspace name -> host path), as staged.
        reference: The task's reference (None: format-level controls, unclassified
            mutants, and a passing check earns nothing).
        same: Whether two answers agree under the task's grader (needed with a
            reference).
        key: Names the task for the per-process caches of classified variants and
            shared verdicts ("" disables the variant cache).
    """

    sources: Mapping[str, Path] = field(default_factory=dict)
    reference: Reference | None = None
    same: Same | None = None
    key: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    @property
    def classifies(self) -> bool:
        """The reference can classify variants (it and the grader's agreement exist)."""
        return self.reference is not None and self.same is not None
