"""``vera-env rescore DIR``: grade the stored answers of an eval run again.

The episodes are not rerun: each stored answer is graded with the tasks' current graders
(``--tasks`` may name a revised suite) or with one grader for every task (``--grader``,
a JSON grader spec such as ``{"kind": "numeric", "rel_tol": 0.01}``, or
``{"kind": "llm", "rubric": "Score 1 if the answer equals {truth}"}`` with
``--judge-base-url`` and ``--judge-model`` for a rubric judge; ``{truth}`` stands for
each task's ground truth).
The result goes to ``DIR/rescore/`` (or ``--out``): results.jsonl, summary.json and
changes.jsonl; the original run is left untouched.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["add_parser", "cmd_rescore"]


def cmd_rescore(args: argparse.Namespace) -> int:
    """Re-grade; print the new table and the verdicts that moved."""
    from pydantic import ValidationError  # noqa: PLC0415

    from vera_env.cli.eval import make_judge  # noqa: PLC0415
    from vera_env.errors import GraderError, TaskFileError  # noqa: PLC0415
    from vera_env.evaluation.metrics import format_summary  # noqa: PLC0415
    from vera_env.evaluation.rescore import rescore_run  # noqa: PLC0415
    from vera_env.evaluation.rundir import RunDir  # noqa: PLC0415
    from vera_env.tasks import GraderSpec, load_tasks  # noqa: PLC0415

    run = RunDir(args.run)
    try:
        settings = run.settings()
        source = load_tasks(args.tasks or settings.tasks)
        grader = GraderSpec.model_validate_json(args.grader) if args.grader else None
    except (FileNotFoundError, TaskFileError, ValidationError, ValueError) as exc:
        print(f"vera-env rescore: {exc}", file=sys.stderr)
        return 2
    if bool(args.judge_base_url) != bool(args.judge_model):
        print("vera-env rescore: --judge-base-url and --judge-model go together", file=sys.stderr)
        return 2
    judge = make_judge(args.judge_base_url, args.judge_model, args.judge_api_key_env)
    out = args.out or run.path / "rescore"
    try:
        summary, changes = rescore_run(run, source, out, grader=grader, judge=judge)
    except (GraderError, KeyError) as exc:
        print(f"vera-env rescore: cannot grade: {exc}", file=sys.stderr)
        return 2
    print(format_summary(summary))
    print(f"\n{len(changes)} verdict(s) changed")
    for c in changes:
        print(f"  {c.task_id} #{c.attempt_index}: {c.answer!r}: {c.before} -> {c.after}"
              f"  ({c.detail})")
    print(f"\nwritten to {out}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``rescore`` on the ``vera-env`` parser."""
    p = sub.add_parser("rescore", help="re-grade the stored answers of an eval run",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="the eval run folder")
    p.add_argument("--tasks", help="task source with the graders to use (default: the run's)")
    p.add_argument("--grader", help='one grader for every task, as JSON: {"kind": "numeric", '
                                    '"rel_tol": 0.01}')
    p.add_argument("--judge-base-url", help="endpoint of an LLM judge for llm graders "
                                             '(with an llm --grader)')
    p.add_argument("--judge-model", help="the judge's served model id")
    p.add_argument("--judge-api-key-env", default="OPENAI_API_KEY")
    p.add_argument("--out", type=Path, help="where to write (default RUN/rescore)")
    p.set_defaults(func=cmd_rescore)
