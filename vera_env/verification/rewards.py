"""How a step's reward is composed, and the bounds that keep it from being farmed.

The verification part is the harness-executed score: a node is worth the share of its
checks that *passed and discriminated* (failed on some mutant of the data they read,
``vera_env.verification.strength``), counted up to ``checks_per_node``, divided among at most
``max_rewarded_nodes`` nodes. So an episode's verification reward lies in
``[0, verification_weight]`` however many nodes are declared: one hundred nodes with
cheap checks earn no more than the bound, and a re-declared or duplicate node earns
nothing (the environment does not record it).

The correctness part comes from the task's grader at the end. When the grader cannot
decide (an LLM judge that is down), the part is ``None`` — an infrastructure fault is
never scored as a wrong answer, since a fake 0 corrupts group-relative advantages.

Formula (defaults in brackets)::

    node_value   = min(evidence units, K) / K [K=3]: each *fact* a passing,
                   discriminating check establishes (the file it was varied through and
                   its verdicts over that file's mutants) counts once per episode,
                   weighed by the share of those mutants it rejected; a check repeated,
                   reworded, gated, or declared again in a later node adds nothing new;
                   with strength off [on], "discriminating" is not tested and facts are
                   distinct commands of weight 1
    verification = verification_weight [0.5] * node_value / max_rewarded_nodes [4]
                   for each of the first max_rewarded_nodes new nodes; a node with a
                   passing (so strength-tested) check takes a slot even if it earns 0
    correctness  = correctness_weight [1.0] if the graded answer is correct else 0
                   (None when not graded, or the grade is unscorable)
    penalty      = format_penalty [0.02] for a rejected free turn (see below)
    reward(step) = verification + correctness - penalty

Which refused turns are penalised. Only a rejected *free* turn: a malformed wire format,
a turn longer than the action limit, or an unusable ``FINAL ANSWER`` (a command, a stub,
a placeholder). Not penalised: a refused reply to a forced prompt (``ForcedAnswer``'s
reserve or its extra ask: losing the step is the price), an answer withheld by
``EmissionGate`` (a nudge, not an error), a node not recorded (a duplicate, or a
measurement check sent back for a rewrite), and every turn of an unscorable episode
(an infrastructure fault is not the model's).

``RewardLedger`` is the one place that does this arithmetic: the environment records
what happened in a turn and asks the ledger what it is worth.

The time a step may take is bounded by the same settings (``step_bound_s``): one
command, at most ``MAX_CHECKS_PER_NODE`` checks one after another, then strength until
the node's wall-clock backstop — so a model cannot buy reward with a step that never
ends.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vera_env.records import RewardPartsRecord
from vera_env.verification.checks import MAX_CHECKS_PER_NODE, CheckResult, evidence_units, fact_of

if TYPE_CHECKING:
    from vera_env.sandbox import SandboxLimits

__all__ = ["STRENGTH_BACKSTOP_FACTOR", "HasChecks", "RewardConfig", "RewardLedger",
           "StrengthConfig", "node_verification", "step_bound_s"]

STRENGTH_BACKSTOP_FACTOR = 4.0
"""A node's strength work is budgeted in its runs' own time, which load cannot raise;
its wall-clock backstop is this multiple of ``StrengthConfig.deadline_max_s``, reached only
by runs starved of CPU (``vera_env.verification.strength.budget``)."""


class HasChecks(Protocol):
    """What the reward reads of a node: its checks' verdicts, nothing else.

    The graph's node (``vera_env.records.NodeRecord``) is one; naming the shape keeps
    what the reward may read of a node to its checks.
    """

    @property
    def checks(self) -> Sequence[CheckResult]:
        """The node's executed checks."""
        ...


class StrengthConfig(BaseModel):
    """How strength testing varies the data and bounds its work
    (``vera_env.verification.strength``; ``RewardConfig.strength``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mutants: int = Field(4, ge=1)
    """Mutants per task file: variants whose answer differs from the file's own, as the
    task's reference recomputes it (the family's aimed mutations first, then lines
    dropped, numbers moved, one record dropped or changed, the header removed)."""
    seed: int = 0
    """Seed of the mutations, so strength verdicts are reproducible."""
    controls: int = Field(4, ge=1)
    """Variants per task file whose answer is unchanged but whose bytes are not
    (records re-ordered, irrelevant records dropped, comments added, lines re-wrapped,
    recompressed: what the task's family declares and its reference confirms); a check
    that fails one does not follow the answer (a fingerprint, a clock, metadata)."""
    luck_bound: float = Field(0.05, gt=0, le=1)
    """The chance that any check driven only by entropy (clock, PIDs, randomness) earns
    in an episode is at most this: confirmations are scaled to the number of checks
    tested (``vera_env.verification.strength.luck``)."""
    max_files: int = Field(4, ge=1)
    """Task files varied per check, nearest first (those it names, then those its
    files were derived from)."""
    max_mb: int = Field(32, ge=1)
    """Window per task file (after decompression): larger files are judged on their
    first this-many MiB, which bounds the time and disk strength costs."""
    deadline_factor: float = Field(10.0, gt=0)
    """A node's strength deadline is this multiple of its passing checks' own time plus
    the episode's derivation's (wall time less waiting for a CPU: what load cannot
    raise) ..."""
    deadline_floor_s: float = Field(20.0, gt=0)
    """... at least this many seconds ..."""
    deadline_max_s: float = Field(120.0, gt=0)
    """... and at most this many. The node's strength runs may use 4x its deadline in
    own time (at most 2x this); a check not decided by then earns nothing. The wall-clock
    backstop of every node is ``STRENGTH_BACKSTOP_FACTOR`` times this (runs starved by
    other load: the episode is unscorable)."""
    max_shadows: int = Field(24, ge=1)
    """Shadow workspaces (variants with the episode replayed) alive at once, plus the
    confirmation replays of killing mutants; least recently used files are dropped."""
    max_shadow_mb: int = Field(1024, ge=1)
    """Disk the shadow workspaces may write together: a size-capped memory-backed
    mount per episode where the harness runs as root (a replay that writes past it
    gets "no space left" and earns nothing), checked between commands elsewhere."""
    scan_budget_s: float = Field(3.0, gt=0)
    """Seconds the harness may spend, after each command, finding which task files it
    named (for replays); past it the command counts as naming every task file, which
    can only make a replay-derived check harder to earn, never easier."""
    share_verdicts: bool = True
    """Share strength verdicts of pure checks between the episodes of a process (a GRPO
    group writes the same checks over the same files): a verdict is served only for the
    same command, the same content readable under ``/work`` and the same sandbox, after
    two runs agreed, never to a luck-bound confirmation, and charged to the budget as
    its run was (``vera_env.verification.strength.verdicts``). No reward changes."""


class RewardConfig(BaseModel):
    """Weights, bounds and penalties of the reward (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    verification_weight: float = Field(0.5, ge=0.0)
    """Upper bound of an episode's total verification reward."""
    correctness_weight: float = Field(1.0, ge=0.0)
    """Reward for a correct final answer."""
    checks_per_node: int = Field(3, ge=1)
    """Passing checks beyond this many earn nothing more for one node."""
    max_rewarded_nodes: int = Field(4, ge=1)
    """Only the first this-many new nodes earn verification reward."""
    format_penalty: float = Field(0.02, ge=0.0)
    """Subtracted for each rejected free turn (malformed, too long, unusable answer);
    refused forced replies and withheld answers are not penalised."""
    strength: StrengthConfig | None = Field(default_factory=lambda: StrengthConfig())
    """Test passing checks on variants of the task's data, the episode replayed on each
    (``vera_env.verification.strength``); a check that does not fail on a mutant earns
    nothing. ``None`` (or ``False``) turns it off; ``True`` is the defaults."""

    @model_validator(mode="before")
    @classmethod
    def _strength_switch(cls, data: Any) -> Any:
        """``strength`` as a switch (``True``/``False``) and, for one release, the flat
        ``strength_*`` keys of earlier versions (run files written before are read)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        flat = {key.removeprefix("strength_"): data.pop(key)
                for key in list(data) if key.startswith("strength_")}
        value = data.get("strength", True)
        if flat:
            warnings.warn("RewardConfig's strength_* keys are now StrengthConfig fields: "
                          "RewardConfig(strength={" + ", ".join(f"{k!r}: ..." for k in flat)
                          + "}); the flat keys are read until the next release",
                          DeprecationWarning, stacklevel=2)
        if value is False or value is None:
            data["strength"] = None
        elif value is True or flat:
            base = {} if value is True else (
                value.model_dump() if isinstance(value, StrengthConfig) else dict(value))
            data["strength"] = {**base, **flat}
        return data


def step_bound_s(limits: SandboxLimits, config: RewardConfig,
                 n_checks: int = MAX_CHECKS_PER_NODE) -> float:
    """The longest one step may take, as a formula of the limits.

    ``timeout_s + strength.scan_budget_s + n_checks x check_timeout_s +
    STRENGTH_BACKSTOP_FACTOR x strength.deadline_max_s``: the turn's one command, the
    scan of what it named (for replays, with strength on), its node's checks one after
    another (at most ``MAX_CHECKS_PER_NODE``), then strength testing until the node's
    wall-clock backstop — which covers finding what each check reads, building and
    classifying variants, staging and replaying shadows and every check run (only when
    strength is on and there are checks). A node's strength ends when its budget of
    its runs' own time is spent, which on a machine with no other load is well before
    the backstop (``vera_env.verification.strength.budget``); the backstop is reached
    only when other load starves the runs, and the episode is then unscorable. Not
    included: the sandbox's kill latency for each run cut at a bound, and, for an
    ``llm``-graded answer, the judge's reply (bounded by its client's timeout and
    retries). The README (Rewards) and the hostile-turn fuzzer use this function.

    Args:
        limits: The sandbox limits (``timeout_s``, ``check_timeout_s``).
        config: The reward configuration (``strength``: its ``deadline_max_s`` and
            ``scan_budget_s``).
        n_checks: Checks the step's node declared (more than ``MAX_CHECKS_PER_NODE``
            never run); the default is the worst case.

    Example:
        >>> from vera_env.sandbox import SandboxLimits
        >>> step_bound_s(SandboxLimits(), RewardConfig())    # 60 + 3 + 16 x 30 + 4 x 120
        1023.0
        >>> step_bound_s(SandboxLimits(timeout_s=3, check_timeout_s=1.5),
        ...              RewardConfig(strength={"deadline_max_s": 5}))
        50.0
    """
    checks = max(0, min(n_checks, MAX_CHECKS_PER_NODE))
    on = config.strength
    scan = on.scan_budget_s if on else 0.0
    strength = STRENGTH_BACKSTOP_FACTOR * on.deadline_max_s if on and checks else 0.0
    return limits.timeout_s + scan + checks * limits.check_timeout_s + strength


def node_verification(node: HasChecks, rewarded_so_far: int, config: RewardConfig,
                      seen: Collection[str] = ()) -> float:
    """Verification reward of a newly recorded node.

    Args:
        node: The node just recorded (not a duplicate).
        rewarded_so_far: How many earlier nodes of the episode were counted.
        config: The reward configuration.
        seen: Facts earlier nodes of the episode established (``fact_of``): they add
            nothing again.

    Returns:
        The node's share of the episode's bounded verification reward.
    """
    if rewarded_so_far >= config.max_rewarded_nodes:
        return 0.0
    units = evidence_units(node.checks, seen)
    value = min(units, config.checks_per_node) / config.checks_per_node
    return config.verification_weight * value / config.max_rewarded_nodes


@dataclass(slots=True)
class RewardLedger:
    """One episode's reward bookkeeping: every number the environment returns comes
    from here.

    Attributes:
        config: The reward configuration.
        rewarded_nodes: Nodes of the episode that earned verification reward so far.
        verification_total: Verification reward of the episode so far.
        facts: What the episode's earning checks established so far (``fact_of``).
    """

    config: RewardConfig = field(default_factory=RewardConfig)
    rewarded_nodes: int = 0
    verification_total: float = 0.0
    facts: set[str] = field(default_factory=set)

    def node(self, node: HasChecks) -> float:
        """Value a newly recorded node (a duplicate is never recorded) and count it.

        A node takes a rewarded slot when it earned, and also — with strength on — when
        any of its checks passed and so was strength-tested, earning or not: otherwise
        a node of coin-flip checks that missed cost nothing and could be declared again
        until one landed.
        """
        value = node_verification(node, self.rewarded_nodes, self.config, self.facts)
        self.facts.update(fact_of(c) for c in node.checks if c.earns)
        tested = self.config.strength is not None and any(c.passed for c in node.checks)
        if (value > 0 or tested) and self.rewarded_nodes < self.config.max_rewarded_nodes:
            self.rewarded_nodes += 1
        return value

    def correctness(self, correct: bool | None) -> float | None:
        """The correctness part of a graded answer; None when it could not be graded."""
        return None if correct is None else self.config.correctness_weight * float(correct)

    def step(self, *, verification: float = 0.0, correctness: float | None = None,
             rejected: bool = False, penalised: bool = True,
             unscorable: bool = False) -> RewardPartsRecord:
        """The reward of one step, added to the episode's verification total.

        Args:
            verification: What the turn's new node earned (``node``).
            correctness: What the turn's released answer earned (``correctness``).
            rejected: The turn was rejected (``info["error"]`` is set).
            penalised: The phase penalises a rejected turn (free turns only).
            unscorable: The episode is unscorable: no penalty, whatever the model did.
        """
        self.verification_total += verification
        penalty = self.config.format_penalty if rejected and penalised and not unscorable \
            else 0.0
        return RewardPartsRecord(verification=verification, correctness=correctness,
                                 penalty=penalty)
