"""``vera-env play``: play a task yourself, seeing exactly what the model sees.

Type turns in the wire format (a ``<command>`` block, NODE and CHECK lines, a
``FINAL ANSWER:`` line); end each turn with a line holding only ``.``. The harness runs
your commands and checks in the same sandbox and scores you as it would score a model.
At the end the episode is shown as the eval table shows a model's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vera_env.spec import SANDBOX_NAMES
from vera_env.wrappers import DEFAULT_WRAPPERS, WRAPPERS_HELP

__all__ = ["add_parser", "cmd_play"]


def cmd_play(args: argparse.Namespace) -> int:
    """Play one episode at the terminal."""
    from vera_env.cli.demo import format_table  # noqa: PLC0415
    from vera_env.cli.eval import env_spec  # noqa: PLC0415
    from vera_env.cli.policy_loader import make_policy  # noqa: PLC0415
    from vera_env.errors import TaskFileError  # noqa: PLC0415
    from vera_env.rollout import run_episode  # noqa: PLC0415
    from vera_env.tasks import load_tasks  # noqa: PLC0415
    from vera_env.wrappers import RecordEpisode  # noqa: PLC0415

    try:
        source = load_tasks(args.tasks)
        if args.task_id:
            source.get(args.task_id)
    except (TaskFileError, KeyError) as exc:
        print(f"vera-env play: {exc}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(source.ids()))
        return 0
    env = env_spec(args).build(tasks=source)
    if args.record:
        env = RecordEpisode(env, args.record)
    try:
        attempt = run_episode(env, make_policy("human", args, source), task_id=args.task_id,
                              seed=args.seed)
    finally:
        env.close()
    print()
    print(format_table([("you", attempt)]))
    if attempt.status == "provider":
        print("\nyou left before answering; nothing was graded")
    else:
        verdict = {True: "yes", False: "no", None: "not graded"}[attempt.correct]
        print(f"\nstatus: {attempt.status}; correct: {verdict}; "
              f"verification reward: {attempt.verification_reward:.3f}; "
              f"score: {attempt.score if attempt.score is None else round(attempt.score, 3)}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``play`` on the ``vera-env`` parser."""
    from vera_env.cli.eval import parse_wrappers  # noqa: PLC0415

    p = sub.add_parser("play", help="play a task yourself at the terminal",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default="builtin", help="builtin, a suite folder or a .jsonl")
    p.add_argument("--task-id", help="task to play (default: drawn with --seed)")
    p.add_argument("--list", action="store_true", help="list the task ids and exit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=20)
    p.add_argument("--wrappers", type=parse_wrappers, default=DEFAULT_WRAPPERS,
                   help=WRAPPERS_HELP)
    p.add_argument("--reserve", type=int, default=3)
    p.add_argument("--record", type=Path, help="also write the episode to this folder")
    p.add_argument("--sandbox", choices=SANDBOX_NAMES, default="auto")
    p.set_defaults(func=cmd_play)
