"""The mutable records of one episode and one turn, kept apart from the coordinator.

``VeraEnv`` holds exactly one ``Episode`` between ``reset`` and the end, and builds one
``Turn`` per ``step``; keeping them as plain records makes it visible what an episode
owns (its task, workspace, graph, phase and reward ledger) and what a step reports.
Everything per-episode lives here, so a new episode can never inherit state from the
last one (a wrapper flag that outlived ``reset`` once cost later episodes their extra
ask).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from vera_env.observation.state import AnalysisState
from vera_env.phase import Phase
from vera_env.records import NodeRecord
from vera_env.sandbox import Sandbox, SandboxLimits, Workspace
from vera_env.tasks import Task
from vera_env.tasks.unreferenced import classifiable
from vera_env.verification.checks import CheckResult
from vera_env.verification.grading import same_answer
from vera_env.verification.rewards import RewardLedger, StrengthConfig
from vera_env.verification.strength import StrengthSession, StrengthTask
from vera_env.verification.strength.verdicts import process_store

__all__ = ["Episode", "Turn", "open_strength"]


@dataclass
class Episode:
    """Everything that lives for one episode."""

    task: Task
    workspace: Workspace
    state: AnalysisState = field(default_factory=AnalysisState)
    recent: list[tuple[str, str]] = field(default_factory=list)
    ledger: RewardLedger = field(default_factory=RewardLedger)
    phase: Phase = Phase.OPEN
    steps: int = 0
    nudge: str = ""
    rewrite_asked: set[str] = field(default_factory=set)
    gated: int = 0  # answers withheld by the emission gate (``VeraEnv.require_verified_leaf``)
    answer: str = ""
    answer_phase: Phase | None = None  # the phase whose turn released the answer
    correct: bool | None = None
    unscorable: bool = False
    strength: StrengthSession | None = None  # command log + shadows; closed with the episode

    def close(self) -> None:
        """Close the strength state, then the workspace its shadows were made from."""
        if self.strength is not None:
            self.strength.close()
        self.workspace.close()


def open_strength(task: Task, files: Mapping[str, Path], workspace: Workspace, sandbox: Sandbox,
                  config: StrengthConfig, limits: SandboxLimits) -> StrengthSession:
    """The strength state of an episode on ``task`` staged from ``files`` in
    ``workspace`` (``vera_env.verification.strength``); the episode owns and closes it.
    A task without a reference gets none: nothing tells its recounts from hashes."""
    reference = task.strength_reference(sandbox, timeout_s=limits.check_timeout_s) \
        if classifiable(task) else None
    context = StrengthTask(files, reference, same_answer(task.grader), task.id)
    return StrengthSession(sandbox, context, workspace, config, limits,
                           verdicts=process_store() if config.share_verdicts else None)


@dataclass
class Turn:
    """What one step produced, gathered while it runs."""

    phase: Phase = Phase.OPEN  # the phase the turn was played in
    error: str = ""
    output: str = ""
    notes: list[str] = field(default_factory=list)
    node: NodeRecord | None = None
    checks: tuple[CheckResult, ...] = ()
    verification: float = 0.0
    correctness: float | None = None
    grade_detail: str = ""
    answer_forced: bool = False  # released an answer in the extra ask
