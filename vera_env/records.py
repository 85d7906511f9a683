"""Typed records of a step, its node and its checks: the one schema past ``env.step``.

The environment hands a step to the outside as ``info``, a dict (the Gymnasium
contract), and a run keeps it as JSON. Read back by string key in every place that
needed a field, each reader derived the rules again: whether a check *earns* was
written four times, and one copy (a benchmark's) counted a check whose strength was
never tested as earning nothing while the reward counted it. So a step is parsed here
once, into frozen records, and every reader uses their fields:

* ``StepRecord.from_info`` turns what ``env.step`` returned into a record;
* ``StepRecord.from_dict`` reads one back from JSON (a run folder written before
  these records existed reads the same: a missing key takes its default);
* ``to_dict`` writes the JSON that runs have always held, key for key.

The harness builds these records itself: a check's verdict is a ``CheckRecord``
(``CheckResult``), the graph's node a ``NodeRecord``, a step's reward a
``RewardPartsRecord``. Kept as a runtime class beside a record class, each concept had
two copies of its fields and of what it counts, free to drift apart.

``CheckRecord.earns`` is the one definition of a check that earns verification reward
(``vera_env.verification.rewards``): it passed, and strength did not show it to pass on
data with a different answer. With strength off ``discriminating`` is None for every
check, so a passing check earns (and counts once per distinct command).

Example:
    >>> step = StepRecord.from_dict({"reward": 0.125, "step": 2, "node": {
    ...     "id": "n1", "kind": "qc", "summary": "s", "rho": 1.0, "checks": [
    ...         {"name": "c", "kind": "range", "command": "true", "passed": True,
    ...          "discriminating": False}]}})
    >>> step.node.checks[0].earns, step.node.n_earning, step.reward
    (False, 0, 0.125)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, SupportsFloat

from vera_env import info as keys

__all__ = ["STEP_FIELDS", "STEP_RECORD_FIELDS", "CheckRecord", "NodeRecord", "RewardPartsRecord",
           "StepRecord", "check_earns", "recorded_nodes"]

STEP_FIELDS: tuple[str, ...] = (
    keys.STEP, keys.ERROR, keys.NUDGE, keys.COMMAND_OUTPUT, keys.NODE, keys.CHECKS,
    keys.REWARD_PARTS, keys.FORCING, keys.PREFILL, keys.ANSWER, keys.ANSWER_FORCED,
    keys.ANSWER_PHASE, keys.CORRECT, keys.GRADE_DETAIL, keys.UNSCORABLE, keys.GATED,
    keys.VERIFICATION_TOTAL)
"""The ``info`` keys a step keeps: enough to summarise an episode from its steps alone."""

STEP_RECORD_FIELDS: tuple[str, ...] = ("action", "reward", "terminated", "truncated",
                                       *STEP_FIELDS)
"""Every field of a stored step, in the order the JSON holds them: the step's own
return values, then ``STEP_FIELDS``."""


def check_earns(passed: bool, discriminating: bool | None) -> bool:
    """Whether a check with these verdicts earns verification reward.

    It must have passed; strength may then show it does not discriminate (``False``:
    it passed on a mutant too), while ``None`` (not tested: strength off) leaves it
    earning.

    Example:
        >>> check_earns(True, None), check_earns(True, False), check_earns(False, True)
        (True, False, False)
    """
    return passed and discriminating is not False


@dataclass(frozen=True, slots=True)
class CheckRecord:
    """The harness's verdict on one declared check (``verification.checks.CheckResult``).

    Attributes:
        name: What the model said is being checked.
        kind: The check kind (conservation, range, invariance, type).
        command: The command that was run, verbatim.
        passed: The verdict the harness read. False for anything unrunnable.
        detail: Why it failed (empty when it passed).
        discriminating: Whether it failed on some mutant of its data; None when
            strength was not tested.
        killed_by: The mutants that made it fail.
        evidence: What strength saw it do: the file it was varied through and its
            verdicts over every mutant of that file (``T`` held, ``F`` rejected). Checks
            of one episode with the same evidence establish one fact (``fact_of``).
        malformed: It printed a measurement rather than a verdict.
        duration_s: Wall seconds of the run on the original workspace (strength bounds
            its mutant runs by it).
        cpu_s: CPU seconds of that run (``ExecResult.cpu_s``; None: not counted).
        cpu_wait_s: Its seconds waiting for a CPU (``ExecResult.cpu_wait_s``). With
            ``cpu_s``, strength's budget grows with the run's own time, not with
            ``duration_s``, which load raises. Both are kept out of ``to_dict`` and
            comparisons: what the machine measured, not what the check did.
    """

    name: str
    kind: str
    command: str
    passed: bool
    detail: str = ""
    discriminating: bool | None = None
    killed_by: tuple[str, ...] = ()
    evidence: str = ""
    malformed: bool = False
    duration_s: float = 0.0
    cpu_s: float | None = field(default=None, compare=False)
    cpu_wait_s: float | None = field(default=None, compare=False)

    @property
    def earns(self) -> bool:
        """Whether this check counts towards verification reward (``check_earns``)."""
        return check_earns(self.passed, self.discriminating)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckRecord:
        """Parse a check dict (``to_dict``)."""
        discriminating = data.get("discriminating")
        return cls(name=_str(data.get("name")), kind=_str(data.get("kind")),
                   command=_str(data.get("command")), passed=bool(data.get("passed")),
                   detail=_str(data.get("detail")),
                   discriminating=None if discriminating is None else bool(discriminating),
                   killed_by=tuple(_str(k) for k in data.get("killed_by") or ()),
                   evidence=_str(data.get("evidence")), malformed=bool(data.get("malformed")),
                   duration_s=float(data.get("duration_s") or 0.0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, ``killed_by`` as a list."""
        return {"name": self.name, "kind": self.kind, "command": self.command,
                "passed": self.passed, "detail": self.detail,
                "discriminating": self.discriminating, "killed_by": list(self.killed_by),
                "evidence": self.evidence, "malformed": self.malformed,
                "duration_s": self.duration_s}


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One finding the model declared, with the harness's verdicts on its checks.

    The graph (``vera_env.observation.state.AnalysisState``) holds these and the step
    carries the same record: kept as two classes, the runtime node and the record of it
    each had their own copy of the fields and of what counts (``n_passed``).

    Attributes:
        id: ``n1``, ``n2``, ... in declaration order.
        kind: The node kind (load, qc, transform, test, interpret, answer).
        summary: The finding in the model's words.
        artifact: The file the finding produced or concerns, if named.
        parents: Ids of existing nodes this builds on (unknown ids were dropped).
        command: The command run in the same turn.
        step: The environment step that declared it.
        checks: The executed checks.
    """

    id: str
    kind: str
    summary: str
    artifact: str = ""
    parents: tuple[str, ...] = ()
    command: str = ""
    step: int = 0
    checks: tuple[CheckRecord, ...] = ()

    @property
    def rho(self) -> float:
        """Pass fraction of the checks (0.0 without any), for the record (``to_dict``, a
        run's ``mean_rho``). The emission gate does not read it: a passing check that
        does not discriminate counts here, and the gate asks for a check that earns
        (``AnalysisState.leaf_verified``). Derived, not stored: every record the env
        wrote holds exactly this value, so ``from_dict`` reads it back unchanged."""
        return self.n_passed / len(self.checks) if self.checks else 0.0

    @property
    def n_passed(self) -> int:
        """Checks that passed."""
        return sum(c.passed for c in self.checks)

    @property
    def n_weak(self) -> int:
        """Checks that passed but were shown not to discriminate (they verify nothing)."""
        return sum(c.passed and c.discriminating is False for c in self.checks)

    @property
    def n_earning(self) -> int:
        """Checks that earn (``CheckRecord.earns``)."""
        return sum(c.earns for c in self.checks)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeRecord:
        """Parse a node dict (``to_dict``; its ``rho`` is derived again)."""
        return cls(id=_str(data.get("id")), kind=_str(data.get("kind")),
                   summary=_str(data.get("summary")), artifact=_str(data.get("artifact")),
                   parents=tuple(_str(p) for p in data.get("parents") or ()),
                   command=_str(data.get("command")), step=int(data.get("step") or 0),
                   checks=tuple(CheckRecord.from_dict(c) for c in data.get("checks") or ()))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every field, ``rho`` between ``step`` and ``checks``."""
        return {"id": self.id, "kind": self.kind, "summary": self.summary,
                "artifact": self.artifact, "parents": list(self.parents),
                "command": self.command, "step": self.step, "rho": self.rho,
                "checks": [c.to_dict() for c in self.checks]}


@dataclass(frozen=True, slots=True)
class RewardPartsRecord:
    """A step's reward by source: what ``RewardLedger.step`` returns and the step keeps.

    Attributes:
        verification: Reward from this step's new node.
        correctness: Reward from grading, None when not graded (or unscorable).
        penalty: Format penalty (non-negative; subtracted).
    """

    verification: float = 0.0
    correctness: float | None = None
    penalty: float = 0.0

    @property
    def total(self) -> float:
        """The scalar the environment returns as the step's reward."""
        return self.verification + (self.correctness or 0.0) - self.penalty

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RewardPartsRecord:
        """Parse ``to_dict``; None or empty: no reward."""
        data = data or {}
        correctness = data.get("correctness")
        return cls(verification=float(data.get("verification") or 0.0),
                   correctness=None if correctness is None else float(correctness),
                   penalty=float(data.get("penalty") or 0.0))

    def to_dict(self) -> dict[str, float | None]:
        """JSON-ready: every field."""
        return {"verification": self.verification, "correctness": self.correctness,
                "penalty": self.penalty}


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of an episode: what ``env.step`` returned, less the observation.

    Attributes:
        action: The policy's text.
        reward: The step's reward.
        terminated: The episode ended with an answer.
        truncated: The budget ended the episode.
        node: The node recorded this turn; None when none was.
        checks: The checks executed this turn (a node sent back for a rewrite has
            checks but no ``node``).
        Others: The ``info`` keys of the same names (``vera_env.info``).
    """

    action: str = ""
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    step: int = 0
    error: str = ""
    nudge: str = ""
    command_output: str = ""
    node: NodeRecord | None = None
    checks: tuple[CheckRecord, ...] = ()
    reward_parts: RewardPartsRecord = RewardPartsRecord()
    forcing: bool = False
    prefill: str = ""
    answer: str = ""
    answer_forced: bool = False
    answer_phase: str = ""
    correct: bool | None = None
    grade_detail: str = ""
    unscorable: bool = False
    gated: int = 0
    verification_total: float = 0.0

    @classmethod
    def from_info(cls, info: Mapping[str, Any], reward: SupportsFloat, terminated: bool,
                  truncated: bool, *, action: str = "") -> StepRecord:
        """The record of one ``env.step``: its reward, flags and ``info``.

        Args:
            info: The step's ``info`` (keys beyond ``STEP_FIELDS`` are not kept).
            reward: The step's reward.
            terminated: The step's ``terminated``.
            truncated: The step's ``truncated``.
            action: The text the step was given.
        """
        return cls.from_dict({**info, "action": action, "reward": float(reward),
                              "terminated": terminated, "truncated": truncated})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepRecord:
        """Parse a stored step (``to_dict``, or a step of a run written before records).

        Raises:
            ValueError: ``data`` is not a mapping.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a step is a JSON object, got {type(data).__name__}")
        node = data.get(keys.NODE)
        correct = data.get(keys.CORRECT)
        return cls(
            action=_str(data.get("action")), reward=float(data.get("reward") or 0.0),
            terminated=bool(data.get("terminated")), truncated=bool(data.get("truncated")),
            step=int(data.get(keys.STEP) or 0), error=_str(data.get(keys.ERROR)),
            nudge=_str(data.get(keys.NUDGE)), command_output=_str(data.get(keys.COMMAND_OUTPUT)),
            node=NodeRecord.from_dict(node) if node else None,
            checks=tuple(CheckRecord.from_dict(c) for c in data.get(keys.CHECKS) or ()),
            reward_parts=RewardPartsRecord.from_dict(data.get(keys.REWARD_PARTS)),
            forcing=bool(data.get(keys.FORCING)), prefill=_str(data.get(keys.PREFILL)),
            answer=_str(data.get(keys.ANSWER)), answer_forced=bool(data.get(keys.ANSWER_FORCED)),
            answer_phase=_str(data.get(keys.ANSWER_PHASE)),
            correct=None if correct is None else bool(correct),
            grade_detail=_str(data.get(keys.GRADE_DETAIL)),
            unscorable=bool(data.get(keys.UNSCORABLE)), gated=int(data.get(keys.GATED) or 0),
            verification_total=float(data.get(keys.VERIFICATION_TOTAL) or 0.0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``STEP_RECORD_FIELDS`` in order; no node is ``{}``, as in ``info``."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out[keys.NODE] = self.node.to_dict() if self.node is not None else {}
        out[keys.CHECKS] = [c.to_dict() for c in self.checks]
        out[keys.REWARD_PARTS] = self.reward_parts.to_dict()
        return {name: out[name] for name in STEP_RECORD_FIELDS}


def recorded_nodes(steps: Sequence[StepRecord]) -> list[NodeRecord]:
    """The nodes ``steps`` recorded, in declaration order."""
    return [step.node for step in steps if step.node is not None]


def _str(value: Any) -> str:
    return "" if value is None else str(value)
