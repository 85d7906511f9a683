"""Task validation: replay each task's reference and careless solutions through the env.

Why the real environment. A task is only as good as its reference solution and its
trap, and both can rot silently: a generator change that shifts a column, a check that
passes on any data, a trap whose careless answer is accidentally right. Reading the
task file cannot catch those; replaying it can. So every task's reference solution is
played by ``OraclePolicy`` through ``VeraEnv`` and the sandbox, exactly as a model's
turns would be, and the task fails unless the answer grades correct, every check passes
and -- with strength testing -- every check discriminates (fails on some mutant of its
data); the trap's careless solution is played too and must be graded wrong.

It is evaluation, so it lives here and the CLI (``vera-env tasks validate``) only
prints it. Episodes are played through the same lifecycle and env pools as every runner
(``vera_env.rollout``): a replay that raises is that task's ``FAIL``, not a crash.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from vera_env.policy import OraclePolicy, ScriptedPolicy
from vera_env.records import CheckRecord
from vera_env.rollout import Attempt, EnvPool, play_job
from vera_env.sandbox import Sandbox, make_sandbox
from vera_env.spec import EnvSpec
from vera_env.tasks import Task, TaskSource
from vera_env.tasks.unreferenced import classifiable
from vera_env.verification.grading import grade_against
from vera_env.verification.rewards import RewardConfig, StrengthConfig
from vera_env.verification.strength.task import StrengthTask
from vera_env.verification.strength.variants import Classified, Settings, census

__all__ = ["Verdict", "VerdictStatus", "strength_sample", "validate_task", "validate_tasks"]

VerdictStatus = Literal["ok", "FAIL", "skip"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What validating one task found.

    Attributes:
        task_id: The task.
        status: ``ok``, ``FAIL`` or ``skip`` (nothing to replay, or no judge for it).
        checks: ``passed/total`` of the oracle's checks.
        discriminating: ``n/total`` of checks shown to discriminate, ``-`` if not tested.
        careless: The careless solution's answer and verdict, ``-`` without a trap.
        note: Why it failed or was skipped.
        variants: Per task file, the controls and mutants strength builds for it
            (``c``/``m``; ``*`` when the task's reference did not classify them).
        controls: Controls built over the task's files.
        mutants: Mutants built over the task's files.
        classified: Whether the task's reference classified its variants.
    """

    task_id: str
    status: VerdictStatus
    checks: str = "-"
    discriminating: str = "-"
    careless: str = "-"
    note: str = ""
    variants: str = "-"
    controls: int = 0
    mutants: int = 0
    classified: bool = False


def validate_task(task: Task, source: TaskSource, oracle_envs: EnvPool,
                  careless_envs: EnvPool, *, judged: bool = True,
                  reward: RewardConfig | None = None, sandbox: Sandbox | None = None
                  ) -> Verdict:
    """Replay a task's reference solution (and careless solution) through the env.

    Args:
        task: The task, in ``source``.
        source: The task source the environments draw from.
        oracle_envs: Environments for the reference solution (with strength testing
            when wanted).
        careless_envs: Environments for the trap's careless solution.
        judged: The environments grade ``llm`` tasks (a judge was given).
        reward: The oracle environments' reward settings when they test strength
            (the variants are then counted and checked against the family's
            declarations); None without strength.
        sandbox: Where a ``reference`` program classifies the variants (None: one is
            made for the task when it has such a program).

    Returns:
        The ``Verdict``.
    """
    if not task.solution:
        return Verdict(task.id, "skip", note="no reference solution to replay")
    attempt = play_job(oracle_envs, OraclePolicy(source), (task.id, None))
    checks = [c for step in attempt.steps for c in step.checks]
    tested = [c for c in checks if c.discriminating is not None]
    passed = f"{sum(c.passed for c in checks)}/{len(checks)}"
    shown = f"{sum(bool(c.discriminating) for c in tested)}/{len(tested)}" if tested else "-"
    if attempt.unscorable and task.grader.kind == "llm" and not judged:
        return Verdict(task.id, "skip", passed, shown,
                       note="llm-graded: pass --judge-url to grade it")
    files = _variant_census(task, reward, sandbox)
    problems = _oracle_problems(task, attempt, checks) + _census_problems(task, files)
    careless = "-"
    if task.trap and not problems:
        wrong = play_job(careless_envs, ScriptedPolicy({task.id: task.trap.careless_solution}),
                         (task.id, None))
        verdict = "wrong" if wrong.correct is False else "NOT WRONG"
        careless = f"{wrong.answer or '(none)'} ({verdict})"
        problems += _careless_problems(task.trap.wrong_answer, wrong)
    note = "; ".join(problems) if problems or classifiable(task) else \
        "no reference: its checks earn nothing, its answer is paid"
    return Verdict(task.id, "FAIL" if problems else "ok", passed, shown, careless=careless,
                   note=note,
                   variants=" ".join(f"{f.name} {len(f.controls)}c/{len(f.mutants)}m"
                                     f"{'' if f.classified else '*'}" for f in files) or "-",
                   controls=sum(len(f.controls) for f in files),
                   mutants=sum(len(f.mutants) for f in files),
                   classified=bool(files) and all(f.classified for f in files))


def _with_strength(reward: RewardConfig, on: bool) -> RewardConfig:
    """``reward`` with strength on (its own settings, else the defaults) or off."""
    strength = (reward.strength or StrengthConfig()) if on else None
    return reward.model_copy(update={"strength": strength})


def _variant_census(task: Task, config: RewardConfig | None,
                    sandbox: Sandbox | None) -> list[Classified]:
    """The variants strength builds for the task's files (none with strength off)."""
    if config is None or config.strength is None:
        return []

    def same(a: str, b: str) -> bool:
        return grade_against(task.grader, a, b).correct is True
    settings = Settings.of(config.strength)
    if not classifiable(task) or task.reference is not None:
        reference = task.reference if classifiable(task) else None
        return census(StrengthTask(task.data_files(), reference, same, task.id), settings)
    own = sandbox is None
    box = make_sandbox("auto") if sandbox is None else sandbox
    try:
        return census(StrengthTask(task.data_files(), task.strength_reference(box), same,
                                   task.id), settings)
    finally:
        if own:
            box.close()


def _census_problems(task: Task, files: list[Classified]) -> list[str]:
    """A family whose reference contradicts its own declarations is broken (a
    ``reference`` program declares none: each transform is tried, kept if it keeps the
    answer), and so is a reference that cannot solve the task's own files."""
    problems = [f"{f.name}: the reference says {', '.join(f.refuted[:3])} change the "
                "answer, yet the family declares them answer-preserving"
                for f in files if f.refuted and task.reference is not None]
    if classifiable(task):
        problems += [f"{f.name}: {f.note}" for f in files if not f.classified and f.note]
    return problems


def _oracle_problems(task: Task, attempt: Attempt, checks: list[CheckRecord]) -> list[str]:
    if attempt.status != "ok":
        return [f"oracle ended {attempt.status}: {attempt.error[:160]}"]
    if attempt.unscorable:
        problems = ["unscorable: the grader could not decide (is the judge reachable?)"]
    elif not attempt.correct:
        problems = [f"oracle answer {attempt.answer!r} graded wrong (truth {task.answer!r})"]
    else:
        problems = []
    problems += [f"check {c.name!r} failed: {c.detail[:120]}" for c in checks if not c.passed]
    problems += [f"node {step.node.id or '?'} earns nothing: {step.checks[0].detail[:120]}"
                 for step in attempt.steps if step.node is not None and step.checks
                 and not any(c.earns for c in step.checks) and classifiable(task)]
    if not checks:
        problems.append("the reference solution declares no checks")
    return problems


def _careless_problems(trap_answer: str, wrong: Attempt) -> list[str]:
    if wrong.correct is not False:
        return [f"the trap does not bite: careless answer {wrong.answer!r} graded "
                f"{wrong.correct}" + (f" ({wrong.status}: {wrong.error[:120]})"
                                      if wrong.status != "ok" else "")]
    if wrong.answer != trap_answer:
        return [f"careless answer {wrong.answer!r} is not the trap's {trap_answer!r}"]
    return []


def strength_sample(tasks: Sequence[Task], mode: Literal["first-seed", "all", "off"]
                    ) -> set[str]:
    """Ids to strength-test: all, none, or the first seed of each type x difficulty (and
    variant kind, ``+kind``): a check's structure is the same for every seed of a type."""
    if mode == "all":
        return {t.id for t in tasks}
    if mode == "off":
        return set()
    firsts: dict[str, str] = {}
    for task in tasks:  # generated ids less their seed: type x difficulty, or type + variant
        generated = task.id.split("+")[0].count(".") == 3
        firsts.setdefault(re.sub(r"\.s\d+(?=\+|$)", "", task.id) if generated else task.id,
                          task.id)
    return set(firsts.values())


def validate_tasks(tasks: Sequence[Task], source: TaskSource, *, strength_ids: set[str],
                   jobs: int = 1, spec: EnvSpec | None = None, judge: Any = None,
                   progress: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """``validate_task`` over many tasks, ``jobs`` at a time.

    Args:
        tasks: The tasks, all in ``source``.
        source: The task source.
        strength_ids: Tasks whose oracle checks are strength-tested.
        jobs: Tasks in flight at once (the work of an episode is in sandboxed
            subprocesses, so threads suffice).
        spec: The environment (``max_steps``, sandbox, limits); its wrappers are
            ignored (a replay is judged bare) and strength is set per task. Default:
            ``EnvSpec(max_steps=20)``.
        judge: Grades ``llm`` tasks (None: they are skipped).
        progress: Called with each verdict as it is reached.

    Returns:
        The verdicts, in the order of ``tasks``.
    """
    spec = (spec or EnvSpec(max_steps=20)).model_copy(update={"wrappers": ()})

    def pool(strength: bool) -> EnvPool:
        reward = _with_strength(spec.reward, strength)
        built = spec.model_copy(update={"reward": reward})
        return EnvPool(partial(built.build, tasks=source, judge=judge))

    def one(task: Task) -> Verdict:
        tested = task.id in strength_ids
        verdict = validate_task(task, source, strong if tested else plain, plain,
                                judged=judge is not None,
                                reward=_with_strength(spec.reward, True)
                                if tested else None, sandbox=programs)
        if progress is not None:
            progress(verdict)
        return verdict

    programs = make_sandbox(spec.sandbox, spec.limits, config=spec.sandbox_config) \
        if any(t.reference_program is not None for t in tasks) else None
    try:
        with pool(True) as strong, pool(False) as plain, \
                ThreadPoolExecutor(max_workers=max(1, jobs)) as executor:
            return list(executor.map(one, tasks))
    finally:
        if programs is not None:
            programs.close()
