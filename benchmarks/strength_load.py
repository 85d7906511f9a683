"""Does strength's verdict move with machine load? The reference solution played quiet and
beside busy loops.

Strength's budget was a wall-clock deadline: the same turns on ``real.h5ad.detected_cells``
earned verification 0.250 and 0.500 quiet and 0.167 and 0.125 beside two busy loops
(``python3 -c 'while 1: pass' &`` twice), and ``vera-env tasks validate real`` at load 10
failed that task's own reference. The budget is now the node's runs' own time
(``vera_env.verification.strength.budget``). This plays each task's reference solution
``--n`` times alone and ``--n`` times beside ``--loops`` busy loops (started here, killed
after each episode) and reports, per task and condition, the median verification
reward, discriminating checks, checks cut by the budget, unscorable episodes and wall
time. The loops run at this script's own niceness (``nice -n 10 python ...`` nices
both), as concurrent training envs would.

Usage::

    python benchmarks/strength_load.py [--n 3] [--loops 2]
        [--tasks real.h5ad.detected_cells.s0 tab.sentinel_mean.easy.s0]

Prints a markdown table and writes ``benchmarks/results/strength_load.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from vera_env.policy import OraclePolicy
from vera_env.rollout import Attempt, EnvPool, play_job
from vera_env.spec import EnvSpec
from vera_env.tasks import Task, TaskSource
from vera_env.tasks.builtin import builtin_source
from vera_env.tasks.real import make_real_task

RESULTS = Path(__file__).resolve().parent / "results" / "strength_load.json"
CUT = "strength budget"


@dataclass(frozen=True, slots=True)
class Row:
    """One task under one condition, medians over its episodes."""

    task: str
    condition: str
    episodes: int
    verification: float
    verification_all: list[float]
    discriminating: float
    checks: float
    cut_by_budget: float
    unscorable: int
    wall_s: float
    load_before: float


def _task(task_id: str) -> Task:
    return make_real_task(task_id) if task_id.startswith("real.") else \
        builtin_source().get(task_id)


@contextmanager
def busy_loops(n: int) -> Iterator[None]:
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def _episode(envs: EnvPool, policy: OraclePolicy, task_id: str) -> tuple[Attempt, float]:
    started = time.monotonic()
    attempt = play_job(envs, policy, (task_id, None))
    return attempt, time.monotonic() - started


def measure(task_id: str, n: int, loops: int) -> list[Row]:
    task = _task(task_id)
    source = TaskSource([task], name="bench")
    policy = OraclePolicy(source)
    rows = []
    with EnvPool(partial(EnvSpec(max_steps=20).build, tasks=source)) as envs:
        _episode(envs, policy, task.id)  # classify the variants once (cached per process)
        for condition, hogs in (("quiet", 0), (f"{loops} busy loops", loops)):
            found = []
            for _ in range(n):
                load = os.getloadavg()[0]
                with busy_loops(hogs):
                    attempt, wall = _episode(envs, policy, task.id)
                checks = [c for step in attempt.steps for c in step.checks]
                found.append((attempt, wall, load, checks))
            rows.append(_row(task.id, condition, found))
    return rows


def _row(task_id: str, condition: str, found: list) -> Row:
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 4) if values else 0.0
    return Row(
        task=task_id, condition=condition, episodes=len(found),
        verification=med([a.verification_reward for a, *_ in found]),
        verification_all=[round(a.verification_reward, 4) for a, *_ in found],
        discriminating=med([sum(bool(c.discriminating) for c in cs) for *_, cs in found]),
        checks=med([len(cs) for *_, cs in found]),
        cut_by_budget=med([sum(CUT in (c.detail or "") for c in cs) for *_, cs in found]),
        unscorable=sum(a.unscorable for a, *_ in found),
        wall_s=med([w for _, w, _, _ in found]),
        load_before=med([load for _, _, load, _ in found]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3, help="episodes per task and condition")
    parser.add_argument("--loops", type=int, default=2, help="busy loops beside the episode")
    parser.add_argument("--tasks", nargs="+",
                        default=["real.h5ad.detected_cells.s0", "tab.sentinel_mean.easy.s0"])
    args = parser.parse_args()
    rows = [row for task_id in args.tasks for row in measure(task_id, args.n, args.loops)]
    print("| task | condition | verification (median; all) | discriminating / checks | "
          "cut by budget | unscorable | wall s | load before |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.task} | {r.condition} | {r.verification:.3f}; "
              f"{', '.join(f'{v:.3f}' for v in r.verification_all)} | "
              f"{r.discriminating:g} / {r.checks:g} | {r.cut_by_budget:g} | {r.unscorable} | "
              f"{r.wall_s:.1f} | {r.load_before:.1f} |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "niceness": os.nice(0)},
        "n": args.n, "loops": args.loops, "rows": [asdict(r) for r in rows]}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
