"""``vera-env tasks``: list, show, validate and export task sources.

Why ``validate`` runs the real environment. A task is only as good as its reference
solution and its trap, and both can rot silently: a generator change that shifts a
column, a check that passes on any data, a trap whose careless answer is accidentally
right. Reading the task file cannot catch those; replaying it can. So every task's
reference solution is played by ``policies.OraclePolicy`` through `VeraEnv` and the
sandbox, exactly as a model's turns would be, and the task fails unless the answer
grades correct, every check passes and -- with strength testing -- every check
discriminates (fails on some mutant of its data); the trap's careless solution is played
too and must be graded wrong. Strength testing re-runs every check against mutants, so
by default it covers the first seed of each type and difficulty (a check's structure is
the same for every seed of a type); ``--strength all`` covers every task.

Builtin generation runs in ``--jobs`` processes and episodes in ``--jobs`` threads (the
work of an episode is in sandboxed subprocesses), so the standard sample of 5 seeds x 13
types x 3 difficulties takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Verdict", "add_parser", "format_rows", "validate_task", "validate_tasks"]

_BUILTIN = "builtin"


def format_rows(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table with a rule under the header."""
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _csv_arg(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _source(args: argparse.Namespace) -> Any:
    """The task source named on the command line (builtin honours the sample options)."""
    from vera_env.tasks import load_tasks  # noqa: PLC0415 - keep `vera-env --help` fast
    from vera_env.tasks.named import SOURCE_NAMES, named_source  # noqa: PLC0415

    if args.source in SOURCE_NAMES:
        return named_source(args.source, seeds=range(args.seeds), types=args.types,
                            difficulties=args.difficulties)
    return load_tasks(args.source)


def _generate(ids: Sequence[str], jobs: int) -> list[Any]:
    """Builtin tasks made in ``jobs`` processes (generation is numpy and gzip, CPU-bound)."""
    from vera_env.tasks.builtin import make_task  # noqa: PLC0415

    if jobs <= 1 or len(ids) <= 1:
        return [make_task(tid) for tid in ids]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(make_task, ids, chunksize=1))


def _tasks(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from vera_env.tasks import TaskSource  # noqa: PLC0415

    source = _source(args)
    if args.source == _BUILTIN:
        tasks = _generate(source.ids(), args.jobs)
        return TaskSource(tasks, name=_BUILTIN), tasks
    return source, list(source)


# ----- list / show -----

def cmd_list(args: argparse.Namespace) -> int:
    """Print the families of every named source (or of one), or the tasks of a source."""
    from vera_env.tasks import load_tasks  # noqa: PLC0415
    from vera_env.tasks.named import SOURCE_NAMES, source_table  # noqa: PLC0415

    if args.source in ("all", *SOURCE_NAMES):
        for name in SOURCE_NAMES if args.source == "all" else [args.source]:
            print(f"== {name}: {SOURCE_NAMES[name]}")
            print((_types_table() if name == _BUILTIN else format_rows(*source_table(name)))
                  + "\n")
        return 0

    rows = [(t.id, t.grader.kind, str(len(t.data_files())), "yes" if t.solution else "-",
             "yes" if t.trap else "-", t.question[:60]) for t in load_tasks(args.source)]
    print(format_rows(("task", "grader", "files", "solution", "trap", "question"), rows))
    return 0


def _types_table(results: dict[str, list[bool]] | None = None) -> str:
    from vera_env.tasks.builtin import FAMILIES, TASK_TYPES, make_task, task_id  # noqa: PLC0415

    rows = []
    for name in TASK_TYPES if results is None else [t for t in TASK_TYPES if t in results]:
        trap = make_task(task_id(name)).trap
        row = [FAMILIES[name.split(".")[0]].split(" (")[0], name,
               trap.description if trap else "-"]
        if results is not None:
            passed = results.get(name, [])
            row.insert(2, f"{sum(passed)}/{len(passed)}")
        rows.append(row)
    head = ["family", "type", "trap"] if results is None else ["family", "type", "passed", "trap"]
    return format_rows(head, rows)


def cmd_show(args: argparse.Namespace) -> int:
    """Print one task: question, grader, answer, files, trap and (optionally) solution."""
    from vera_env.tasks import load_tasks  # noqa: PLC0415

    task = load_tasks(args.source).get(args.task_id)
    print(f"id:       {task.id}\nquestion: {task.question}\nanswer:   {task.answer}")
    grader = task.grader.model_dump(exclude_none=True)
    print(f"grader:   {grader}\ntags:     {', '.join(task.tags) or '-'}")
    print(f"human_solvable: {'yes' if task.human_solvable else 'no'}")
    for name, path in task.data_files().items():
        print(f"file:     {name} ({path.stat().st_size:,} bytes)")
    if task.trap:
        print(f"trap:     {task.trap.description}\n          careless answer: "
              f"{task.trap.wrong_answer}")
    if args.solution:
        for i, turn in enumerate(task.solution, 1):
            print(f"\n--- solution turn {i} ---\n{turn}")
    return 0


# ----- validate -----

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
    """

    task_id: str
    status: str
    checks: str = "-"
    discriminating: str = "-"
    careless: str = "-"
    note: str = ""


def validate_task(task: Any, oracle_env: Any, careless_env: Any, source: Any) -> Verdict:
    """Replay a task's reference solution (and careless solution) through the env.

    Args:
        task: The task.
        oracle_env: A `VeraEnv` on ``source`` (with strength testing when wanted).
        careless_env: A `VeraEnv` on ``source`` for the trap's careless solution.
        source: The task source the envs draw from.

    Returns:
        The `Verdict`.
    """
    from policies import OraclePolicy, ScriptedPolicy  # noqa: PLC0415
    from vera_env.rollout import run_episode  # noqa: PLC0415

    if not task.solution:
        return Verdict(task.id, "skip", note="no reference solution to replay")
    attempt = run_episode(oracle_env, OraclePolicy(source), task_id=task.id)
    checks = [c for step in attempt.steps for c in step["checks"]]
    tested = [c for c in checks if c["discriminating"] is not None]
    shown = dict(checks=f"{sum(c['passed'] for c in checks)}/{len(checks)}",
                 discriminating=f"{sum(c['discriminating'] for c in tested)}/{len(tested)}"
                 if tested else "-")
    if attempt.unscorable and task.grader.kind == "llm" and oracle_env.judge is None:
        return Verdict(task.id, "skip", **shown, note="llm-graded: pass --judge-url to grade it")
    problems = _oracle_problems(task, attempt, checks)
    careless = "-"
    if task.trap and not problems:
        wrong = run_episode(careless_env, ScriptedPolicy({task.id: task.trap.careless_solution}),
                            task_id=task.id)
        verdict = "wrong" if wrong.correct is False else "NOT WRONG"
        careless = f"{wrong.answer or '(none)'} ({verdict})"
        if wrong.correct is not False:
            problems.append(f"the trap does not bite: careless answer {wrong.answer!r} graded "
                            f"{wrong.correct}")
        elif wrong.answer != task.trap.wrong_answer:
            problems.append(f"careless answer {wrong.answer!r} is not the trap's "
                            f"{task.trap.wrong_answer!r}")
    return Verdict(task.id, "FAIL" if problems else "ok", **shown, careless=careless,
                   note="; ".join(problems))


def _oracle_problems(task: Any, attempt: Any, checks: list[dict[str, Any]]) -> list[str]:
    if attempt.status != "ok":
        return [f"oracle ended {attempt.status}: {attempt.error[:160]}"]
    if attempt.unscorable:
        problems = ["unscorable: the grader could not decide (is the judge reachable?)"]
    elif not attempt.correct:
        problems = [f"oracle answer {attempt.answer!r} graded wrong (truth {task.answer!r})"]
    else:
        problems = []
    problems += [f"check {c['name']!r} failed: {c['detail'][:120]}"
                 for c in checks if not c["passed"]]
    problems += [f"check {c['name']!r} does not discriminate (passes on every mutant)"
                 for c in checks if c["passed"] and c["discriminating"] is False]
    if not checks:
        problems.append("the reference solution declares no checks")
    return problems


def _strength_for(tasks: Sequence[Any], mode: str) -> set[str]:
    """Ids to strength-test: all, none, or the first seed of each type x difficulty."""
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


def validate_tasks(tasks: Sequence[Any], source: Any, *, strength_ids: set[str], jobs: int = 1,
                   max_steps: int = 20, sandbox: str = "auto", judge: Any = None,
                   progress: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """`validate_task` over many tasks, ``jobs`` at a time, each thread with its own envs.

    Args:
        tasks: The tasks, all in ``source``.
        source: The task source.
        strength_ids: Tasks whose oracle checks are strength-tested.
        jobs: Episodes in flight at once.
        max_steps: Step budget of each episode.
        sandbox: Sandbox backend.
        judge: Grades ``llm`` tasks (None: they are skipped).
        progress: Called with each verdict as it is reached.

    Returns:
        The verdicts, in the order of ``tasks``.
    """
    from vera_env.env import VeraEnv  # noqa: PLC0415
    from vera_env.verification.rewards import RewardConfig  # noqa: PLC0415

    local = threading.local()
    envs: list[Any] = []
    lock = threading.Lock()

    def env(strength: bool) -> Any:
        key = f"env_{strength}"
        if not hasattr(local, key):
            made = VeraEnv(source, max_steps=max_steps, sandbox=sandbox, judge=judge,
                           reward=RewardConfig(strength=strength))
            setattr(local, key, made)
            with lock:
                envs.append(made)
        return getattr(local, key)

    def one(task: Any) -> Verdict:
        verdict = validate_task(task, env(task.id in strength_ids), env(False), source)
        if progress is not None:
            progress(verdict)
        return verdict

    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(one, tasks))
    finally:
        for made in envs:
            made.close()


def _judge(args: argparse.Namespace) -> Any:
    if not args.judge_url:
        return None
    from vera_env.verification.grading import RubricJudge  # noqa: PLC0415

    return RubricJudge.from_endpoint(args.judge_url, args.judge_model)


def cmd_validate(args: argparse.Namespace) -> int:
    """Replay every task's reference and careless solutions; exit 1 on any failure."""
    source, tasks = _tasks(args)
    done = [0]

    def progress(verdict: Verdict) -> None:
        done[0] += 1
        sys.stderr.write(f"\r[{done[0]}/{len(tasks)}] {verdict.status:<4} {verdict.task_id:<44}")
        sys.stderr.flush()

    verdicts = validate_tasks(tasks, source, strength_ids=_strength_for(tasks, args.strength),
                              jobs=args.jobs, max_steps=args.max_steps, sandbox=args.sandbox,
                              judge=_judge(args), progress=progress)
    sys.stderr.write("\n")
    print(format_rows(("task", "status", "checks", "discriminating", "careless", "note"),
                      [(v.task_id, v.status, v.checks, v.discriminating, v.careless, v.note)
                       for v in verdicts]))
    if args.source == _BUILTIN:
        by_type: dict[str, list[bool]] = {}
        for v in verdicts:
            by_type.setdefault(v.task_id.rsplit(".", 2)[0], []).append(v.status == "ok")
        print("\n" + _types_table(by_type))
    failed = [v for v in verdicts if v.status == "FAIL"]
    skipped = sum(v.status == "skip" for v in verdicts)
    print(f"\n{len(verdicts) - len(failed) - skipped} ok, {len(failed)} failed, {skipped} "
          f"skipped, of {len(verdicts)} tasks")
    return 1 if failed else 0


# ----- export -----

def cmd_export(args: argparse.Namespace) -> int:
    """Write a source as a folder suite."""
    from vera_env.tasks import write_suite  # noqa: PLC0415

    _, tasks = _tasks(args)
    try:
        written = write_suite(tasks, args.dir)
    except FileExistsError as exc:
        print(f"vera-env tasks export: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} tasks to {args.dir}")
    return 0


def _sample_options(parser: argparse.ArgumentParser, seeds: int) -> None:
    parser.add_argument("--seeds", type=int, default=seeds,
                        help=f"builtin: seeds 0..N-1 of every type (default {seeds})")
    parser.add_argument("--difficulties", type=_csv_arg, default=["easy", "medium", "hard"],
                        help="builtin: comma-separated (easy,medium,hard,xl)")
    parser.add_argument("--types", type=_csv_arg, default=None,
                        help="builtin: comma-separated types (default: all)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="parallel generation processes and episode threads")


def _reporting_errors(command: Callable[[argparse.Namespace], int]
                      ) -> Callable[[argparse.Namespace], int]:
    """Print a broken source or an unknown id as one line (exit 2), not a traceback."""

    def run(args: argparse.Namespace) -> int:
        from vera_env.errors import TaskFileError  # noqa: PLC0415
        from vera_env.tasks import UnknownTaskError  # noqa: PLC0415

        try:
            return command(args)
        except (TaskFileError, UnknownTaskError) as exc:
            print(f"vera-env tasks: {exc}", file=sys.stderr)
            return 2

    return run


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``tasks`` and its subcommands on the ``vera-env`` parser."""
    tasks = sub.add_parser("tasks", help="list, show, validate and export task sources")
    tsub = tasks.add_subparsers(dest="tasks_command", required=True)

    listing = tsub.add_parser("list", help="types and traps by source, or a source's tasks")
    listing.add_argument("source", nargs="?", default="all",
                         help="all (default), builtin, real, perturbed, canary, or a path")
    listing.set_defaults(func=_reporting_errors(cmd_list))

    show = tsub.add_parser("show", help="one task in full")
    show.add_argument("task_id")
    show.add_argument("--source", default=_BUILTIN)
    show.add_argument("--solution", action="store_true", help="print the reference turns")
    show.set_defaults(func=_reporting_errors(cmd_show))

    validate = tsub.add_parser("validate", help="replay reference and careless solutions "
                                                "through the real environment")
    validate.add_argument("source", help="builtin, real, perturbed, canary, a suite folder, a "
                                         ".jsonl file or a BioMysteryBench folder")
    _sample_options(validate, seeds=5)
    validate.add_argument("--strength", choices=["first-seed", "all", "off"],
                          default="first-seed", help="which tasks' checks are mutation-tested")
    validate.add_argument("--sandbox", choices=["auto", "bwrap", "local"], default="auto")
    validate.add_argument("--max-steps", type=int, default=20)
    validate.add_argument("--judge-url", default="", help="OpenAI-compatible endpoint for "
                                                          "llm-graded tasks")
    validate.add_argument("--judge-model", default="", help="model name at --judge-url")
    validate.set_defaults(func=_reporting_errors(cmd_validate))

    export = tsub.add_parser("export", help="write any source as a folder suite")
    export.add_argument("source")
    export.add_argument("dir", type=Path)
    _sample_options(export, seeds=1)
    export.set_defaults(func=_reporting_errors(cmd_export))
