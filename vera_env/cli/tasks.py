"""``vera-env tasks``: list, show, validate and export task sources.

``validate`` replays every task's reference and careless solutions through the real
environment (``vera_env.evaluation.validation`` says why). Strength testing re-runs
every check against mutants, so by default it covers the first seed of each type and
difficulty (a check's structure is the same for every seed of a type); ``--strength
all`` covers every task.

Builtin generation runs in ``--jobs`` processes and episodes in ``--jobs`` threads (the
work of an episode is in sandboxed subprocesses), so the standard sample of 5 seeds x 13
types x 3 difficulties takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vera_env.spec import SANDBOX_NAMES

if TYPE_CHECKING:
    from vera_env.evaluation.validation import Verdict

__all__ = ["add_parser", "format_rows"]

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

def cmd_validate(args: argparse.Namespace) -> int:
    """Replay every task's reference and careless solutions; exit 1 on any failure (and,
    with ``--strict``, when a task declares no reference)."""
    from vera_env.evaluation.progress import Progress  # noqa: PLC0415
    from vera_env.evaluation.validation import strength_sample, validate_tasks  # noqa: PLC0415
    from vera_env.spec import EnvSpec, JudgeEndpoint  # noqa: PLC0415
    from vera_env.tasks.unreferenced import announce_unreferenced, unreferenced  # noqa: PLC0415

    source, tasks = _tasks(args)
    announce_unreferenced(source)
    judge = (JudgeEndpoint(base_url=args.judge_url, model=args.judge_model).build()
             if args.judge_url else None)
    spec = EnvSpec(tasks=args.source, max_steps=args.max_steps, sandbox=args.sandbox,
                   wrappers=())
    strong = strength_sample(tasks, args.strength)
    with Progress(len(tasks), unit="task") as progress:
        verdicts = validate_tasks(tasks, source, strength_ids=strong, jobs=args.jobs,
                                  spec=spec, judge=judge,
                                  progress=lambda v: progress.advance(f"{v.status} {v.task_id}"))
    print(format_rows(("task", "status", "checks", "discriminating", "variants", "careless",
                       "note"),
                      [(v.task_id, v.status, v.checks, v.discriminating, v.variants,
                        v.careless, v.note) for v in verdicts]))
    print("\n" + _families_table(verdicts))
    if args.source == _BUILTIN:
        by_type: dict[str, list[bool]] = {}
        for v in verdicts:
            by_type.setdefault(v.task_id.rsplit(".", 2)[0], []).append(v.status == "ok")
        print("\n" + _types_table(by_type))
    failed = [v for v in verdicts if v.status == "FAIL"]
    skipped = sum(v.status == "skip" for v in verdicts)
    print(f"\n{len(verdicts) - len(failed) - skipped} ok, {len(failed)} failed, {skipped} "
          f"skipped, of {len(verdicts)} tasks")
    missing = unreferenced(tasks)
    if args.strict and missing:
        print(f"--strict: {len(missing)} tasks declare no reference "
              f"({', '.join(t.id for t in missing[:5])}{', ...' if len(missing) > 5 else ''})")
    return 1 if failed or (args.strict and missing) else 0


def _families_table(verdicts: Sequence[Verdict]) -> str:
    """Controls and mutants built per family (type, less seed and difficulty), and
    whether the family's reference classified them (``*`` in ``variants``: it did not,
    so the controls are format-level only)."""
    rows: dict[str, list[Verdict]] = {}
    for v in verdicts:
        if v.variants != "-":
            rows.setdefault(family_of(v.task_id), []).append(v)
    if not rows:
        return "(no task was strength-tested: no variants built)"
    return format_rows(
        ("family", "tasks", "controls", "mutants", "classified by reference", "ok"),
        [(name, str(len(vs)), str(sum(v.controls for v in vs)),
          str(sum(v.mutants for v in vs)),
          f"{sum(v.classified for v in vs)}/{len(vs)}",
          f"{sum(v.status == 'ok' for v in vs)}/{len(vs)}") for name, vs in sorted(rows.items())])


def family_of(task_id: str) -> str:
    """A task's family for reports: its id less seed and difficulty (``vcf.het_count``,
    ``real.csv.penguin_mass``, ``tab.fold_change+crlf``), or the id itself."""
    base, plus, kind = task_id.partition("+")
    parts = [p for p in base.split(".") if not re.fullmatch(r"s\d+", p)
             and p not in ("easy", "medium", "hard", "xl")]
    return ".".join(parts) + (plus + kind if plus else "")


# ----- export -----

def cmd_export(args: argparse.Namespace) -> int:
    """Write a source as a folder suite (references as programs, where they can be)."""
    from vera_env.tasks import load_tasks, write_suite  # noqa: PLC0415

    _, tasks = _tasks(args)
    try:
        written = write_suite(tasks, args.dir)
    except FileExistsError as exc:
        print(f"vera-env tasks export: {exc}", file=sys.stderr)
        return 1
    from vera_env.tasks.unreferenced import unreferenced  # noqa: PLC0415

    missing = unreferenced(load_tasks(args.dir))
    print(f"wrote {len(written)} tasks to {args.dir}, {len(written) - len(missing)} with a "
          "reference program" + (f" ({len(missing)} without: their checks will earn "
                                 "nothing; see docs/tasks.md)" if missing else ""))
    return 0


# ----- audit -----

def cmd_audit(args: argparse.Namespace) -> int:
    """Play each task's reference and the attack battery; exit 1 if a task is hackable,
    2 if one could not be measured (an infrastructure fault), else 0."""
    from vera_env.evaluation.attacks import BLIND, POLICIES  # noqa: PLC0415
    from vera_env.evaluation.audit import audit_jobs, audit_tasks, play_jobs  # noqa: PLC0415
    from vera_env.evaluation.audit_report import audit_table, write_audit  # noqa: PLC0415
    from vera_env.evaluation.progress import Progress  # noqa: PLC0415
    from vera_env.spec import EnvSpec  # noqa: PLC0415

    policies = args.policies or list(POLICIES)
    source, tasks = _audited(args)
    spec = EnvSpec(max_steps=args.max_steps, sandbox=args.sandbox, wrappers=())
    jobs = audit_jobs(tasks, policies)
    kept: dict[tuple[str, str], Any] = {}  # the episodes the report draws
    best: dict[str, float] = {}
    with Progress(len(jobs), unit="episode") as progress:
        def on_row(row: dict[str, Any], attempt: Any) -> None:
            task, name, earned = row["task_id"], row["policy"], row["verification"]
            progress.advance(f"{task} {name}: {earned:.3f}")
            if name in BLIND:  # only the best so far: the one a verdict may name
                if earned <= best.get(task, -1.0):
                    return
                best[task] = earned
            kept[(task, name)] = attempt
        rows = play_jobs(jobs, source, spec, workers=args.jobs, on_row=on_row)
    audits = audit_tasks(rows, tasks)
    print(format_rows(*audit_table(audits)))
    settings = {"max_steps": args.max_steps, "sandbox": args.sandbox, "jobs": args.jobs,
                "reward": spec.reward.model_dump()}
    written = write_audit(args.out, args.source, policies, audits, rows, settings, kept)
    hackable = sum(a.verdict == "hackable" for a in audits)
    unscorable = sum(a.verdict == "unscorable" for a in audits)
    print(f"\n{hackable} hackable, {unscorable} unscorable, of {len(audits)} tasks; wrote "
          f"{' and '.join(str(p) for p in written)}")
    return 1 if hackable else 2 if unscorable else 0


def _audited(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The source and its first ``--limit`` tasks (builtin: only those are generated)."""
    from vera_env.tasks import TaskSource  # noqa: PLC0415

    if args.source == _BUILTIN and args.limit:
        tasks = _generate(_source(args).ids()[:args.limit], args.jobs)
        return TaskSource(tasks, name=_BUILTIN), tasks
    source, tasks = _tasks(args)
    return source, tasks[:args.limit] if args.limit else tasks


def _policies_arg(text: str) -> list[str]:
    from vera_env.evaluation.attacks import POLICIES  # noqa: PLC0415

    names = _csv_arg(text)
    unknown = [n for n in names if n not in POLICIES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown policies {unknown}; choose from "
                                         f"{', '.join(POLICIES)}")
    return names


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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    validate.add_argument("--sandbox", choices=SANDBOX_NAMES, default="auto")
    validate.add_argument("--max-steps", type=int, default=20)
    validate.add_argument("--judge-url", default="", help="OpenAI-compatible endpoint for "
                                                          "llm-graded tasks")
    validate.add_argument("--judge-model", default="", help="model name at --judge-url")
    validate.add_argument("--strict", action="store_true",
                          help="fail (exit 1) when a task declares no reference, so its "
                               "checks earn nothing")
    validate.set_defaults(func=_reporting_errors(cmd_validate))

    audit = tsub.add_parser("audit", help="play each task's reference and an attack battery: "
                                          "is the reward hackable?")
    audit.add_argument("source", help="builtin, real, perturbed, canary, a suite folder, a "
                                      ".jsonl file or a BioMysteryBench folder")
    _sample_options(audit, seeds=1)
    audit.add_argument("--policies", type=_policies_arg, default=None,
                       help="comma-separated attacks (default: all)")
    audit.add_argument("--limit", type=int, default=0, help="audit the first N tasks only")
    audit.add_argument("--out", type=Path, default=Path("audit"),
                       help="folder for audit.json and audit.html (default ./audit)")
    audit.add_argument("--sandbox", choices=SANDBOX_NAMES, default="auto")
    audit.add_argument("--max-steps", type=int, default=30)
    audit.set_defaults(func=_reporting_errors(cmd_audit))

    export = tsub.add_parser("export", help="write any source as a folder suite")
    export.add_argument("source")
    export.add_argument("dir", type=Path)
    _sample_options(export, seeds=1)
    export.set_defaults(func=_reporting_errors(cmd_export))
