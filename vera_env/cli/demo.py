"""``vera-env demo``: the main job on the embedded default, no model needed.

It needs no model and no network: on every builtin type and every real-data type
(`vera_env.tasks.real`, files from registry packages the install step fetched) it plays
the oracle (the tasks' reference solutions) and a careless scripted policy (one that falls
into each task's trap) through the real environment and sandbox, and prints what the
harness measured. It is the quickest proof that the reward comes from executed checks: the careless
policy's answers are plausible and wrong, and its checks earn less.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from vera_env.cli.eval import parse_task_ids
from vera_env.evaluation.progress import Progress
from vera_env.rollout import Attempt, EnvPool, play_job
from vera_env.sandbox import sandbox_refusal
from vera_env.spec import SANDBOX_NAMES

if TYPE_CHECKING:
    from vera_env.tasks import TaskSource

__all__ = ["LEGEND", "add_parser", "cmd_demo", "demo_tasks", "format_table"]

LEGEND = (
    "passed: checks that printed True, of those run\n"
    "strong: passing checks that also failed on a mutant of their data (the only ones "
    "that earn)\n"
    "verif:  the episode's verification reward (at most 0.5)"
)
"""What the table's less obvious columns mean, printed under it: the terms were
explained only in docs/quickstart.md, and a table of "9/9  9  0.375" reads as noise
without them."""


def format_table(rows: Sequence[tuple[str, Attempt]]) -> str:
    """A plain-text table of attempts: one row per (policy, attempt)."""
    head = ("policy", "task", "status", "steps", "nodes", "passed", "strong", "verif",
            "answer", "correct")
    body = []
    for policy, a in rows:
        checks = [c for s in a.steps for c in s.checks]
        passed = sum(c.passed for c in checks)
        strong = sum(c.earns for c in checks)
        answer = a.answer if len(a.answer) <= 18 else a.answer[:15] + "..."
        body.append((policy, a.task_id, a.status, str(a.n_steps), str(a.n_nodes),
                     f"{passed}/{len(checks)}", str(strong), f"{a.verification_reward:.3f}",
                     answer,
                     {True: "yes", False: "NO", None: "-"}[a.correct]))
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) for r in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def demo_tasks() -> TaskSource:
    """Builtin and real tasks; real ones are left out, with a note, if not fetched."""
    from vera_env.tasks import TaskSource, load_tasks  # noqa: PLC0415
    from vera_env.tasks.real.sources import MissingSourceError  # noqa: PLC0415

    tasks = list(load_tasks("builtin"))
    try:
        tasks += list(load_tasks("real"))
    except MissingSourceError as exc:
        print(f"real-data tasks left out: {exc}", file=sys.stderr)
    return TaskSource(tasks, name="demo")


def cmd_demo(args: argparse.Namespace) -> int:
    """Play the oracle and the careless policy on every builtin and real-data task."""
    from vera_env.env import vera_base  # noqa: PLC0415
    from vera_env.policy import OraclePolicy, Policy, careless_policy  # noqa: PLC0415
    from vera_env.spec import EnvSpec  # noqa: PLC0415
    from vera_env.tasks import TaskSource  # noqa: PLC0415

    refusal = sandbox_refusal(args.sandbox)
    if refusal:
        print(f"vera-env demo: {refusal}", file=sys.stderr)
        return 2
    tasks = demo_tasks()
    if args.task_ids:
        unknown = [t for t in args.task_ids if t not in set(tasks.ids())]
        if unknown:
            print(f"vera-env demo: --task-ids: {', '.join(unknown)} not among the demo's "
                  f"tasks (one per builtin and real type, seed 0: {tasks.ids()[0]}, ...)",
                  file=sys.stderr)
            return 2
        tasks = TaskSource([tasks.get(t) for t in args.task_ids], name="demo")
    plan: list[tuple[str, Policy, str]] = [("oracle", OraclePolicy(tasks), t.id) for t in tasks]
    careless = careless_policy(tasks)
    plan += [("careless", careless, t.id) for t in tasks if t.trap]
    spec = EnvSpec(tasks="builtin", max_steps=args.max_steps, sandbox=args.sandbox,
                   wrappers=())
    with EnvPool(lambda: spec.build(tasks=tasks)) as pool:
        with pool.lease() as env:
            print(f"sandbox backend: {vera_base(env).sandbox.name}", file=sys.stderr)
        with Progress(len(plan), unit="episode") as progress:

            def play(step: tuple[str, Policy, str]) -> tuple[str, Attempt]:
                attempt = play_job(pool, step[1], (step[2], 0), on_step=progress.step)
                progress.update(attempt)
                return step[0], attempt

            # Episodes are independent; the table keeps the plan's order.
            with ThreadPoolExecutor(max_workers=args.concurrency) as executor:
                rows = list(executor.map(play, plan))
    print(format_table(rows))
    print(f"\n{LEGEND}")
    oracle_ok = all(a.correct for n, a in rows if n == "oracle")
    careless_wrong = all(a.correct is False for n, a in rows if n == "careless")
    print(f"\noracle correct on every task: {'yes' if oracle_ok else 'NO'}; "
          f"careless policy wrong on every trap: {'yes' if careless_wrong else 'NO'}")
    return 0 if oracle_ok and careless_wrong else 1


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``demo`` on the ``vera-env`` parser."""
    demo = sub.add_parser("demo", help="oracle vs careless policy on the builtin and real tasks")
    demo.add_argument("--max-steps", type=int, default=20, help="turns per episode (default: 20)")
    demo.add_argument("--sandbox", choices=SANDBOX_NAMES, default="auto",
                      help="sandbox backend (default: auto, bubblewrap; local runs "
                           "unisolated)")
    demo.add_argument("--task-ids", type=parse_task_ids, default=(), metavar="ID,ID",
                      help="play only these of the demo's tasks (default: all of them)")
    demo.add_argument("--concurrency", type=_positive, default=min(4, os.cpu_count() or 1),
                      help="episodes in flight at once (default: this machine's cores, at most 4)")
    demo.set_defaults(func=cmd_demo)
