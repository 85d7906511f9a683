"""How often does a check driven only by entropy earn, per episode, against the bound?

Strength bounds luck by design (``vera_env.verification.strength.luck``): every tested
node takes a rewarded slot, and the confirmations grow with the number of checks tested
in the episode, so the chance that *any* entropy-driven check earns in an episode is at
most ``StrengthConfig.luck_bound``. This plays the worst case the reward allows —
four nodes (all the rewarded slots) of 16 coin checks each, every check reading the
clock, a PID or ``/dev/urandom`` with a pass chance near the worst one — against a
builtin task's real files, for ``--episodes`` episodes, and prints the share of episodes
in which a coin earned, with a 95% Wilson interval, next to the bound.

Usage::

    python benchmarks/luck_bound.py [--episodes 200] [--task tab.survival_median.easy.s0]

Writes ``benchmarks/results/luck_bound.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

from vera_env.sandbox import SandboxLimits, make_sandbox
from vera_env.tasks.builtin import make_task
from vera_env.verification.checks import run_checks
from vera_env.verification.grading import same_answer
from vera_env.verification.rewards import StrengthConfig
from vera_env.verification.strength import StrengthSession, StrengthTask
from vera_env.wire.protocol import CheckSpec

V = " && echo True || echo False"
COINS = [  # pass chance ~0.8 each; the worst p for the first checks is 0.6-0.8
    "test $(( $(date +%N) % 10 )) -lt 8",
    "test $(( $$ % 10 )) -lt 8",
    "test $(( $(od -An -N1 -tu1 /dev/urandom) % 10 )) -lt 8",
    "test $(( $(date +%N) / 1000 % 10 )) -lt 8",
]


def coin_checks(data_file: str, n: int) -> list[CheckSpec]:
    """``n`` coins that each name the data file (so strength tests them)."""
    return [CheckSpec("range", f"coin{i}",
                      f"test -s {data_file} && {COINS[i % len(COINS)]}{V}") for i in range(n)]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of k successes in n."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--task", default="tab.survival_median.easy.s0")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--checks", type=int, default=16)
    parser.add_argument("--out", default="benchmarks/results/luck_bound.json")
    args = parser.parse_args()
    task = make_task(args.task)
    files = task.data_files()
    data_file = sorted(files)[0]
    config, limits = StrengthConfig(), SandboxLimits()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = make_sandbox("auto", limits)
    earned_episodes, earned_checks, tested, started = 0, 0, 0, time.perf_counter()
    try:
        for _ in range(args.episodes):
            ws = box.stage(files)
            strength_task = StrengthTask(files, task.reference, same_answer(task.grader), task.id)
            session = StrengthSession(box, strength_task, ws, config, limits)
            hit = 0
            for _node in range(args.nodes):
                results = run_checks(coin_checks(data_file, args.checks), ws,
                                     timeout_s=limits.check_timeout_s)
                assessed = session.assess(results)
                tested += sum(r.passed for r in results)
                hit += sum(bool(r.discriminating) for r in assessed)
            session.close()
            ws.close()
            earned_checks += hit
            earned_episodes += hit > 0
    finally:
        box.close()
    wall = time.perf_counter() - started
    low, high = wilson(earned_episodes, args.episodes)
    row = {"task": args.task, "episodes": args.episodes, "nodes": args.nodes,
           "checks_per_node": args.checks, "checks_tested": tested,
           "episodes_with_an_earning_coin": earned_episodes,
           "share": earned_episodes / args.episodes, "share_95ci": [low, high],
           "earning_checks": earned_checks, "bound": config.luck_bound,
           "wall_s": wall}
    print("| episodes | coin checks tested | episodes where a coin earned | share (95% CI) "
          "| bound |")
    print("|---:|---:|---:|---|---:|")
    print(f"| {args.episodes} | {tested} | {earned_episodes} | {row['share']:.3f} "
          f"({low:.3f}-{high:.3f}) | {config.luck_bound} |")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(row, indent=2) + "\n")


if __name__ == "__main__":
    main()
