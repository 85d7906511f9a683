"""The mutable records of one episode and one turn, kept apart from the coordinator.

``VeraEnv`` holds exactly one ``Episode`` between ``reset`` and the end, and builds one
``Turn`` per ``step``; keeping them as plain records makes it visible what an episode
owns (its task, workspace, graph, phase and reward ledger) and what a step reports.
Everything per-episode lives here, so a new episode can never inherit state from the
last one (a wrapper flag that outlived ``reset`` once cost later episodes their extra
ask).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vera_env.observation.state import AnalysisState
from vera_env.phase import Phase
from vera_env.records import NodeRecord
from vera_env.sandbox import Workspace
from vera_env.tasks import Task
from vera_env.verification.checks import CheckResult
from vera_env.verification.rewards import RewardLedger
from vera_env.verification.strength import StrengthSession

__all__ = ["Episode", "Turn"]


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
