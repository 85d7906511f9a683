"""Do the analyst teacher's extra checks earn evidence beyond its answer check?

The analyst teacher's ``q.sh`` prints the answer on line 1 and one or two intermediate
quantities of the computation on lines 2-3 (``training.analyst.INTERMEDIATES``). With
``evidence`` on, its node checks each printed line; off, only line 1. A check on an
intermediate earns more only if it establishes another fact than the answer's (the
evidence rule, ``docs/concepts/rewards.md``): it must reject some kinds of mutation and
hold on others, or be varied through another file, and split no kind. Whether it does is
measured here, not argued: each builtin type is played with ``evidence`` 1.0 and 0.0 in
the learning-curve shape (3 steps, gate + forced, 1 reserved, compact observation),
strength on, the default ``RewardConfig``, one episode at a time.

Per type: the mean verification with and without the extra checks, and per intermediate
on how many seeds its check earned a fact the episode had not yet counted (with the share
of mutation kinds it rejected). An intermediate that earns on no seed should be replaced
or dropped from that type's one-liner.

Usage::

    nice -n 10 python benchmarks/teacher_evidence.py [--types T ...] [--seeds 0 1 2]
        [--difficulty easy] [--out benchmarks/results/teacher_evidence.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vera_env.rollout import Attempt, run_episode
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import TASK_TYPES, make_task
from vera_env.training.analyst import INTERMEDIATES, AnalystTeacher
from vera_env.training.envs import EnvOptions, make_env
from vera_env.verification.checks import evidence_share, fact_of
from vera_env.verification.rewards import RewardConfig

RESULTS = Path(__file__).resolve().parent / "results" / "teacher_evidence.json"


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One check of the teacher's node: which ``q.sh`` line it reads and what it earned."""

    line: int
    earns: bool
    new_fact: bool
    share: float
    evidence: str
    detail: str


@dataclass(frozen=True, slots=True)
class Episode:
    """One played episode, reduced to what the table needs."""

    task_id: str
    evidence: float
    correct: bool | None
    verification: float
    checks: tuple[CheckOutcome, ...]
    wall_s: float


def _outcomes(attempt: Attempt) -> tuple[CheckOutcome, ...]:
    seen: set[str] = set()
    out: list[CheckOutcome] = []
    for step in attempt.steps:
        for line, check in enumerate(step.checks, start=1):
            fact = fact_of(check) if check.earns else ""
            out.append(CheckOutcome(
                line=line, earns=check.earns, new_fact=bool(fact) and fact not in seen,
                share=evidence_share(check) if check.earns else 0.0,
                evidence=check.evidence, detail="" if check.earns else check.detail[:160]))
            seen.add(fact)
    return tuple(out)


def play(task_ids: list[str], evidence: float) -> list[Episode]:
    """Play the teacher on ``task_ids``, one episode at a time, strength on."""
    tasks = TaskSource([make_task(i) for i in task_ids])
    env = make_env(tasks, EnvOptions(env_max_steps=3, wrappers=("gate", "forced"), reserve=1,
                                    observation_variant="compact"), reward=RewardConfig())
    teacher = AnalystTeacher(tasks, evidence=evidence)
    episodes: list[Episode] = []
    try:
        for task_id in task_ids:
            start = time.perf_counter()
            attempt = run_episode(env, teacher, seed=0, task_id=task_id)
            episodes.append(Episode(task_id, evidence, attempt.correct,
                                    attempt.verification_reward, _outcomes(attempt),
                                    time.perf_counter() - start))
            print(f"{task_id} evidence={evidence}: {attempt.verification_reward:.4f}",
                  flush=True)
    finally:
        env.close()
    return episodes


def table_row(task_type: str, extra: list[Episode], single: list[Episode]) -> dict[str, Any]:
    """One type's row: verification with and without the extra checks, and per
    intermediate the seeds on which it earned a new fact."""
    names = INTERMEDIATES[task_type]
    lines = []
    for offset, name in enumerate(names, start=2):
        checks = [c for e in extra for c in e.checks if c.line == offset]
        earning = [c for c in checks if c.new_fact]
        lines.append({"line": offset, "name": name, "earned_on": len(earning),
                      "of": len(extra), "shares": [c.share for c in earning],
                      "evidence": [c.evidence for c in checks]})
    return {
        "family": task_type,
        "v_single": statistics.fmean(e.verification for e in single),
        "v_extra": statistics.fmean(e.verification for e in extra),
        "correct": sum(bool(e.correct) for e in extra + single),
        "episodes": len(extra) + len(single),
        "earning_intermediates": [x["name"] for x in lines if x["earned_on"] == len(extra)],
        "intermediates": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", nargs="*", default=sorted(TASK_TYPES))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--difficulty", default="easy")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    start = time.perf_counter()
    rows, episodes = [], []
    for task_type in args.types:
        ids = [f"{task_type}.{args.difficulty}.s{seed}" for seed in args.seeds]
        extra, single = play(ids, 1.0), play(ids, 0.0)
        rows.append(table_row(task_type, extra, single))
        episodes += [asdict(e) for e in extra + single]
        print(json.dumps({k: rows[-1][k] for k in ("family", "v_single", "v_extra",
                                                   "earning_intermediates")}), flush=True)
    summary = {
        "v_single": statistics.fmean(r["v_single"] for r in rows),
        "v_extra": statistics.fmean(r["v_extra"] for r in rows),
        "types_extra_earns_more": sum(r["v_extra"] > r["v_single"] for r in rows),
        "types": len(rows),
    }
    args.out.write_text(json.dumps({
        "args": {"types": args.types, "seeds": args.seeds, "difficulty": args.difficulty},
        "shape": "max_steps 3, wrappers gate+forced, reserve 1, compact, strength on",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "summary": summary, "table": rows, "wall_s": time.perf_counter() - start,
        "episodes": episodes,
    }, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
