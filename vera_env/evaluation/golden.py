"""Recorded failures, kept as data so they can never happen twice.

Every scenario under ``tests/golden/`` is a real incident from the reference runs (the
seeds cite them) or a failure found while building this package. Adding a newly
observed failure means dropping in a JSON file, not writing a bespoke test — otherwise
the loop stops at "we noticed" and never reaches "it cannot recur".

A scenario is a task (a builtin id, or an inline task whose files are given as text,
with the ``reference`` program strength classifies its variants by: without one its
checks earn nothing, `vera_env.tasks.unreferenced`),
a scripted sequence of raw model turns, and expectations about what the environment
did with each turn and how the episode ended. The model is scripted, so a scenario does
not test whether a real model behaves; it tests everything downstream of the model's
text, which is where every recorded incident did its harm: a quoting slip scored as an
analysis failure, an echoed template inflating a node's checks, a closing tag graded as
part of the answer.

Unknown keys are errors, not no-ops: a typo'd assertion that quietly passes is worse
than no test, because it reads as coverage. A scenario that asserts nothing is an error
for the same reason.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from vera_env.errors import GoldenError
from vera_env.records import StepRecord
from vera_env.rollout import Attempt, run_episode
from vera_env.spec import EnvSpec, SandboxName
from vera_env.verification.grading import Judge
from vera_env.verification.rewards import RewardConfig

__all__ = ["GoldenError", "load_scenarios", "run_scenario", "validate"]

_REQUIRED = {"name", "incident", "source", "turns", "expect"}
_OPTIONAL = {"task_id", "task", "max_steps", "wrappers", "note", "reward"}
_TASK_KEYS = {"question", "answer", "grader", "files", "reference"}
_EXPECT_KEYS = {"steps", "final"}
_STEP_KEYS = {
    "at", "error_contains", "error_empty", "nudge_contains", "nudge_lacks",
    "node_recorded", "n_checks", "checks_passed", "checks_malformed", "reward",
    "reward_max", "verification", "terminated", "truncated", "command_output_contains",
    "answer", "forcing", "prefill", "gated", "observation_contains", "grade_detail_contains",
}
_FINAL_KEYS = {
    "answer", "correct", "terminated", "truncated", "verification_total",
    "verification_total_max", "n_nodes", "unscorable", "answer_forced", "gated",
    "steps_taken",
}


def validate(scenario: dict[str, Any], source: str = "<memory>") -> None:
    """Reject a scenario with missing or unknown keys, or one that asserts nothing.

    Raises:
        GoldenError: Naming ``source`` and the offending key.
    """
    if not isinstance(scenario, dict):
        raise GoldenError(f"{source}: a scenario is a JSON object")
    _keys(scenario, _REQUIRED, _OPTIONAL, source, "scenario")
    if ("task_id" in scenario) == ("task" in scenario):
        raise GoldenError(f"{source}: give exactly one of 'task_id' or 'task'")
    if "task" in scenario:
        _keys(scenario["task"], {"question", "answer", "files"}, _TASK_KEYS - {"question",
              "answer", "files"}, source, "task")
    turns = scenario["turns"]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        raise GoldenError(f"{source}: turns must be a non-empty list of strings")
    expect = scenario["expect"]
    _keys(expect, set(), _EXPECT_KEYS, source, "expect")
    steps = expect.get("steps", [])
    for i, step in enumerate(steps):
        _keys(step, {"at"}, _STEP_KEYS - {"at"}, source, f"expect.steps[{i}]")
        if len(step) < 2:
            raise GoldenError(f"{source}: expect.steps[{i}] asserts nothing")
        if not 1 <= step["at"] <= len(turns):
            raise GoldenError(f"{source}: expect.steps[{i}].at={step['at']} is outside "
                              f"1..{len(turns)}")
    _keys(expect.get("final", {}), set(), _FINAL_KEYS, source, "expect.final")
    if not steps and not expect.get("final"):
        raise GoldenError(f"{source}: no expectations — this asserts nothing")


def _keys(obj: Any, required: set[str], optional: set[str], source: str, where: str) -> None:
    if not isinstance(obj, dict):
        raise GoldenError(f"{source}: {where} must be an object")
    missing = required - set(obj)
    if missing:
        raise GoldenError(f"{source}: {where} is missing {sorted(missing)}")
    unknown = set(obj) - required - optional
    if unknown:
        raise GoldenError(f"{source}: {where} has unknown key(s) {sorted(unknown)}")


def load_scenarios(directory: str | Path) -> list[dict[str, Any]]:
    """Every ``*.json`` scenario under ``directory``, validated, sorted by file name."""
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            scenario = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise GoldenError(f"{path.name}: not valid JSON ({exc})") from exc
        validate(scenario, source=path.name)
        scenario["_file"] = path.name
        out.append(scenario)
    return out


def run_scenario(scenario: dict[str, Any], *, sandbox: SandboxName = "auto",
                 wrap: Callable[[gym.Env, list[str]], gym.Env] | None = None,
                 judge: Judge | None = None) -> list[str]:
    """Play a scenario's turns through the real environment and check expectations.

    The turns are played through the same lifecycle as every episode
    (``vera_env.rollout.run_episode``), and the expectations are read from the
    ``Attempt`` it records, so a scenario checks what a run would store.

    Args:
        scenario: A validated scenario.
        sandbox: Sandbox backend for the environment.
        wrap: ``wrap(env, names)`` applies the scenario's wrappers itself (a test that
            wants to observe every step); None builds them from the ``EnvSpec``.
        judge: Grades ``llm`` tasks (``grading.Judge``); None leaves them unscorable.

    Returns:
        A list of failure messages; empty when every expectation held.
    """
    turns = scenario["turns"]
    names = list(scenario.get("wrappers", []))
    spec = EnvSpec(max_steps=scenario.get("max_steps", len(turns)), sandbox=sandbox,
                   reward=RewardConfig(**scenario.get("reward", {})),
                   wrappers=() if wrap else tuple(names))
    with tempfile.TemporaryDirectory(prefix="vera-golden-") as tmp:
        env = spec.build(tasks=_tasks_for(scenario, Path(tmp)), judge=judge)
        env = _Observed(wrap(env, names) if wrap else env)
        try:
            attempt = run_episode(env, _InOrder(turns), seed=0, max_turns=len(turns))
        finally:
            env.close()
    return _failures(scenario, attempt, env.observations)


class _InOrder:
    """Replays the scenario's turns in order, whatever the step counter says."""

    def __init__(self, turns: list[str]) -> None:
        self._turns = iter(turns)

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return next(self._turns)


class _Observed(gym.Wrapper):
    """Keeps each step's observation: an Attempt records infos, not what the model saw."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observations: list[str] = []

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        self.observations.append(result[0])
        return result


def _failures(scenario: dict[str, Any], attempt: Attempt, observations: list[str]
              ) -> list[str]:
    if attempt.status in ("error", "provider") or not attempt.steps:
        return [f"the episode raised instead of playing: {attempt.error}"]
    failures: list[str] = []
    steps = attempt.steps
    if len(steps) < len(scenario["turns"]):
        failures.append(f"turn {len(steps) + 1}: the episode had already ended")
    for want in scenario["expect"].get("steps", []):
        if want["at"] <= len(steps):
            failures += [f"turn {want['at']}: {m}"
                         for m in _check_step(want, steps[want["at"] - 1],
                                              observations[want["at"] - 1])]
    final = scenario["expect"].get("final", {})
    failures += [f"final: {m}" for m in _check_final(final, attempt)]
    return failures


def _tasks_for(scenario: dict[str, Any], tmp: Path) -> Any:
    from vera_env.tasks import Task, load_tasks  # noqa: PLC0415

    if "task_id" in scenario:
        source = load_tasks("builtin")
        return [source.get(scenario["task_id"])]
    spec = scenario["task"]
    data = tmp / "data"
    for name, text in spec["files"].items():
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    grader = spec.get("grader", {"kind": "exact"})
    return [Task(id=scenario["name"], question=spec["question"], answer=spec["answer"],
                 grader=grader, data_dir=data, reference_program=spec.get("reference"))]


def _check_step(want: dict[str, Any], step: StepRecord, obs: str) -> list[str]:
    """``step``: one recorded step of an Attempt; ``obs``: the observation it returned."""
    got = {
        "error_contains": step.error, "nudge_contains": step.nudge,
        "command_output_contains": step.command_output,
        "observation_contains": obs,
        "grade_detail_contains": step.grade_detail,
    }
    out = [f"{k}: {want[k]!r} not in {got[k][:400]!r}" for k in got
           if k in want and want[k].lower() not in got[k].lower()]
    if "nudge_lacks" in want and want["nudge_lacks"].lower() in step.nudge.lower():
        out.append(f"nudge_lacks: {want['nudge_lacks']!r} in {step.nudge!r}")
    actual = {
        "error_empty": step.error == "", "node_recorded": step.node is not None,
        "n_checks": len(step.checks), "checks_passed": [c.passed for c in step.checks],
        "checks_malformed": [c.malformed for c in step.checks],
        "terminated": step.terminated, "truncated": step.truncated, "answer": step.answer,
        "forcing": step.forcing, "prefill": step.prefill, "gated": step.gated,
    }
    out += [f"{k}: expected {want[k]!r}, got {actual[k]!r}" for k in actual
            if k in want and want[k] != actual[k]]
    reward = step.reward
    if "reward" in want and not math.isclose(reward, want["reward"], abs_tol=1e-9):
        out.append(f"reward: expected {want['reward']}, got {reward}")
    if "reward_max" in want and reward > want["reward_max"] + 1e-12:
        out.append(f"reward_max: {reward} > {want['reward_max']}")
    verification = step.reward_parts.verification
    if "verification" in want and not math.isclose(verification, want["verification"],
                                                    abs_tol=1e-9):
        out.append(f"verification: expected {want['verification']}, got {verification}")
    return out


def _check_final(want: dict[str, Any], attempt: Attempt) -> list[str]:
    last = attempt.steps[-1]
    actual = {
        "answer": last.answer, "correct": last.correct,
        "terminated": last.terminated, "truncated": last.truncated,
        "n_nodes": attempt.n_nodes, "unscorable": last.unscorable,
        "answer_forced": last.answer_forced, "gated": last.gated,
        "steps_taken": last.step,
    }
    out = [f"{k}: expected {want[k]!r}, got {actual[k]!r}" for k in actual
           if k in want and want[k] != actual[k]]
    total = last.verification_total
    if "verification_total" in want and not math.isclose(total, want["verification_total"],
                                                          abs_tol=1e-9):
        out.append(f"verification_total: expected {want['verification_total']}, got {total}")
    if "verification_total_max" in want and total > want["verification_total_max"] + 1e-12:
        out.append(f"verification_total_max: {total} > {want['verification_total_max']}")
    return out
