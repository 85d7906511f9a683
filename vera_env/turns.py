"""The two kinds of turn an episode plays: a free turn and an answer-only turn.

``VeraEnv`` coordinates an episode: its phases, faults, forcing, the observation and
``info``. What one turn does inside its phase is here, written once: a free turn runs
its command, records its node after the checks ran, and offers its answer to the
emission gate; an answer-only turn reads only the answer. Kept inside the env, the
turns and the coordination made one module well past the house's 400 lines;
apart, each reads alone.

Model misbehaviour becomes ``Turn.error`` or a note for the next observation, never an
exception; a ``SandboxError`` propagates, and the env records the episode unscorable.
"""

from __future__ import annotations

from dataclasses import dataclass

from vera_env.episode import Episode, Turn
from vera_env.errors import GraderError
from vera_env.observation.state import normalise
from vera_env.phase import Phase
from vera_env.records import NodeRecord
from vera_env.tasks.unreferenced import classifiable, without_reference
from vera_env.verification.checks import CheckResult, run_checks
from vera_env.verification.grading import Judge, grade
from vera_env.wire.answers import ANSWER_PREFIX, answer_is_usable, extract_answer, strip_markup
from vera_env.wire.protocol import Emission, parse_emission
from vera_env.wire.text import invisible_problem

__all__ = ["GATE_NUDGE", "TurnRules", "play_turn"]

GATE_NUDGE = ("no leaf node of your analysis has a check that passed and discriminates "
              "(fails on mutated data). Add a check that verifies the result you are about "
              "to report from the data, then give the answer again")
"""Why an answer was withheld under ``require_verified_leaf``; the next observation says it."""

_UNUSABLE_ANSWER = ("your FINAL ANSWER was not usable ({why}); give the value, name or "
                    "label the question asks for, not a command or a placeholder")


@dataclass(frozen=True, slots=True)
class TurnRules:
    """The env's settings a turn reads (``VeraEnv``'s arguments of the same meaning).

    Attributes:
        max_action_chars: Longer turns are rejected with an error.
        check_timeout_s: Each check's time limit.
        max_steps: The step budget (the gate never withholds the last step's answer).
        gate: The emission gate is on (``VeraEnv.require_verified_leaf``).
        strength: Strength testing is on (``RewardConfig.strength``).
        judge: Grades ``llm``-graded answers; None leaves them unscorable.
    """

    max_action_chars: int
    check_timeout_s: float
    max_steps: int
    gate: bool = False
    strength: bool = True
    judge: Judge | None = None


def play_turn(ep: Episode, action: str, turn: Turn, rules: TurnRules) -> None:
    """Play ``action`` as ``turn.phase`` allows, into ``ep`` and ``turn``.

    Raises:
        SandboxError: The sandbox failed (not the model's doing).
    """
    if turn.phase.answer_only:
        _play_answer_only(ep, action, turn, rules)
    else:
        _play(ep, action, turn, rules)


def _play_answer_only(ep: Episode, reply: str, turn: Turn, rules: TurnRules) -> None:
    # Only text after the answer prefix counts: asked to commit, a model that keeps
    # acting ("I need to identify the bacterium ... <tool_call>") has not answered.
    turn.error = invisible_problem(reply)
    if turn.error:
        return
    candidate = strip_markup(extract_answer(reply))
    if answer_is_usable(candidate):
        _release(ep, candidate, turn, rules)
        return
    why = (f"no '{ANSWER_PREFIX}' line found" if not candidate.strip()
           else f"got {candidate[:80]!r}")
    turn.error = _UNUSABLE_ANSWER.format(why=why)


def _play(ep: Episode, action: str, turn: Turn, rules: TurnRules) -> None:
    if len(action) > rules.max_action_chars:
        turn.error = (f"your turn was {len(action)} characters; the limit is "
                      f"{rules.max_action_chars}. Put long scripts in a file "
                      f"written by a short command")
        return
    emission = parse_emission(action)  # drops reasoning blocks itself: once per turn
    if emission.error:
        turn.error = emission.error
        return
    if emission.command:
        run_command(ep, emission.command, turn)
    if emission.declares_node:
        _declare(ep, emission, turn, rules)
    if emission.answer:
        _offer_answer(ep, emission.answer, turn, rules)


def run_command(ep: Episode, command: str, turn: Turn) -> None:
    """The one place a model's command runs (checks run in ``_declare``)."""
    result = ep.workspace.run(command)
    if ep.strength is not None:  # strength replays the commands that wrote files
        ep.strength.record(command, result)
    turn.output = result.as_tool_output()
    ep.recent.append((command, turn.output))


def _declare(ep: Episode, emission: Emission, turn: Turn, rules: TurnRules) -> None:
    commands = tuple(spec.command for spec in emission.checks)
    duplicate = ep.state.duplicate_of(emission.summary, commands)
    if duplicate:
        turn.notes.append(f"node not recorded: it repeats {duplicate}. Build on it "
                          f"(parents={duplicate}) instead of re-declaring it")
        return
    results = run_checks(emission.checks, ep.workspace, timeout_s=rules.check_timeout_s)
    results = assess_strength(ep, results, emission.artifact)
    turn.checks = results
    malformed = [r for r in results if r.malformed]
    key = normalise(emission.summary) or emission.kind
    if malformed and key not in ep.rewrite_asked:
        ep.rewrite_asked.add(key)
        bad = malformed[0]
        turn.notes.append(f"node not recorded: check {bad.name!r} printed a measurement, "
                          f"not a verdict ({bad.detail}). Rewrite it as a comparison "
                          f"ending in True or False, then declare the node again")
        return
    node = NodeRecord(id=ep.state.next_id(), kind=emission.kind,
                      summary=emission.summary or "(no summary given)",
                      artifact=emission.artifact,
                      parents=tuple(p for p in emission.parents if p in ep.state),
                      command=emission.command, step=ep.steps, checks=results)
    ep.state.add(node)
    turn.node = node
    turn.verification = ep.ledger.node(node)
    if not emission.checks:
        turn.notes.append(f"{node.id} has no CHECK lines, so nothing verified it")


def assess_strength(ep: Episode, results: tuple[CheckResult, ...],
                    artifact: str = "") -> tuple[CheckResult, ...]:
    """Counterfactual strength of passing checks (``vera_env.verification.strength``):
    a check that does not fail on a variant of the task's data, the episode replayed
    on it, earns nothing. Raises ``SandboxError`` on an infrastructure fault, which
    ``VeraEnv.step`` records as unscorable."""
    if ep.strength is None:
        return results
    if not classifiable(ep.task):  # nothing tells a recount from a hash there
        return without_reference(results)
    return ep.strength.assess(results, artifact=artifact)


def _offer_answer(ep: Episode, raw: str, turn: Turn, rules: TurnRules) -> None:
    answer = strip_markup(raw)
    if not answer_is_usable(answer):
        turn.error = _UNUSABLE_ANSWER.format(why=f"got {answer[:80]!r}")
        return
    if _gate_withholds(ep, rules):
        ep.gated += 1
        turn.notes.append(f"your answer was withheld: {GATE_NUDGE}")
        return
    _release(ep, answer, turn, rules)


def _gate_withholds(ep: Episode, rules: TurnRules) -> bool:
    """The emission gate (``require_verified_leaf``): only with budget left, so the
    last step's answer is always released, and only where a check can earn (not on
    a task strength cannot classify: `vera_env.tasks.unreferenced`)."""
    return (rules.gate and ep.steps < rules.max_steps
            and (not rules.strength or classifiable(ep.task))
            and not ep.state.leaf_verified())


def _release(ep: Episode, answer: str, turn: Turn, rules: TurnRules) -> None:
    ep.answer, ep.answer_phase = answer, turn.phase
    turn.answer_forced = turn.phase is Phase.EXTRA
    try:
        verdict = grade(ep.task, answer, rules.judge)
    except GraderError as exc:  # an outage (judge unreachable), never the answer's doing
        ep.unscorable, turn.grade_detail = True, f"grader fault (unscorable): {exc}"
        return
    ep.correct, turn.grade_detail = verdict.correct, verdict.detail
    turn.correctness = ep.ledger.correctness(verdict.correct)
