"""Does the verification reward rank analysis above fingerprints? (issue 19)

Plays, on every builtin type and every real-data type, the task's reference solution,
its careless solution and the attack battery (``vera_env.evaluation.attacks``: fingerprint
pins, content pins, derived pins, copy-compare, repeated checks, coin nodes, an inode
detector, targeted hashes, slices, unread fields, gated pins, a snapshot macro, column
statistics, and gated recounts of the reference) through the real environment -- strength
on, the default ``RewardConfig``, the play loop of ``vera-env tasks audit``
(``vera_env.evaluation.audit``) -- and prints the verification each earned per episode:
rows are tasks, columns policies, each episode's earning checks kept in the JSON. Below it:
the mean per policy, on how many tasks each beats the reference, how many of each
policy's checks passed on the real workspace (a pin that fails there measures nothing),
the seconds per episode, and the issue's pass criteria:

* every no-analysis policy earns at most 0.05 per episode on every task;
* the reference earns at least 5x the best no-analysis policy on every task (and more
  than 0: a task where nothing earns ranks nothing);
* the reference earns at least 0.25 on average;
* one fact phrased, split or gated (``gated_error``, ``gated_true``, ``repeated_checks``)
  earns at most one check's worth, 0.5 / 12 = 0.042;
* a gated recount of the reference earns at most its honest twin (``first_checks``);
* the reference earns at least every partial or wrong computation (``column_stats``,
  ``careless``).

Coin nodes and the inode detector earn by chance (entropy; the order variants are
written in), so ``--repeat N`` plays them N times per task (seeds 0..N-1) and reports
the mean and the share of episodes in which they earned anything, with a 95% (Wilson)
interval, against ``StrengthConfig.luck_bound``; for the bound, run them ≥ 200
times (each coin episode is ~30 s of 28 nodes x 16 checks), e.g. on one type::

    python benchmarks/reward_ranking.py --types tab.sentinel_mean --policies coin_nodes \\
        --repeat 200 --jobs 2 --out benchmarks/results/reward_ranking_luck.json

Usage::

    python benchmarks/reward_ranking.py [--types T ...] [--policies P ...] [--seeds 0]
        [--difficulties easy] [--no-real] [--repeat 1] [--jobs 1] [--max-steps 30]
        [--out benchmarks/results/reward_ranking.json]

Real-data types are skipped, with a note, when their sources are not fetched
(``vera-env tasks fetch``). Writes every episode (with its wall time) to the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from vera_env.evaluation.attacks import BLIND, POLICIES
from vera_env.evaluation.audit import CAP, FACTOR, Job, play_jobs
from vera_env.spec import EnvSpec
from vera_env.tasks import Task, TaskSource
from vera_env.tasks.builtin import TASK_TYPES, builtin_ids, make_task
from vera_env.tasks.real import REAL_TYPES, make_real_task, real_ids
from vera_env.tasks.real.sources import MissingSourceError
from vera_env.verification.rewards import RewardConfig, StrengthConfig

RESULTS = Path(__file__).resolve().parent / "results" / "reward_ranking.json"
HONEST = ("reference", "careless")
LUCK = ("coin_nodes", "inode_detector")
"""Policies whose earnings are chance (entropy, the order variants are written in):
``--repeat`` plays them that many times per task."""
LUCK_EPISODES = 200
NO_ANALYSIS_CAP = CAP
REFERENCE_FACTOR = FACTOR
REFERENCE_MEAN = 0.25
ONE_FACT = ("gated_error", "gated_true", "repeated_checks")
"""Policies that phrase, split or gate one fact: each may earn one check's worth."""
ONE_FACT_CAP = RewardConfig().verification_weight / (
    RewardConfig().checks_per_node * RewardConfig().max_rewarded_nodes)
PARTIAL = ("column_stats", "careless")
"""Partial or wrong computations: the reference must earn at least as much."""


def make_any(task_id: str) -> Task:
    """A builtin or real task from its id (the factory of the benchmark's source)."""
    return make_real_task(task_id) if task_id.startswith("real.") else make_task(task_id)


def task_ids(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The task ids to play and notes on what was skipped (real sources not fetched)."""
    chosen = args.types or [*TASK_TYPES, *(f"real.{t}" for t in REAL_TYPES)]
    builtin = [t for t in chosen if not t.startswith("real.")]
    real = [t.removeprefix("real.") for t in chosen if t.startswith("real.")]
    ids = list(builtin_ids(args.difficulties, args.seeds, builtin)) if builtin else []
    notes = []
    if args.no_real:
        real = []
    for tid in real_ids(args.seeds, real) if real else ():
        try:
            make_real_task(tid)
        except MissingSourceError as exc:
            notes.append(f"skipped {tid}: real source not fetched ({exc})")
            continue
        ids.append(tid)
    return ids, notes


# ----- playing: the audit's play loop (vera_env.evaluation.audit) -----

def run_jobs(jobs: list[Job], workers: int, max_steps: int) -> list[dict[str, Any]]:
    """Every episode, in ``workers`` processes (1: here), printing progress."""
    source = TaskSource(name="reward-ranking", factory=make_any)
    spec = EnvSpec(max_steps=max_steps, wrappers=(), reward=RewardConfig())
    started = time.perf_counter()
    count = 0

    def done(row: dict[str, Any], attempt: Any) -> None:
        nonlocal count
        count += 1
        print(f"  [{count}/{len(jobs)} {time.perf_counter() - started:6.0f}s] "
              f"{row['task_id']} {row['policy']}#{row['rep']}: {row['verification']:.3f} "
              f"({row['wall_s']:.1f}s, {row['status']})", file=sys.stderr, flush=True)

    return play_jobs(jobs, source, spec, workers=workers, on_row=done)


# ----- the table and the criteria -----

def cells(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """task id -> policy -> mean verification per episode."""
    acc: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        acc[r["task_id"]][r["policy"]].append(r["verification"])
    return {t: {p: statistics.fmean(v) for p, v in ps.items()} for t, ps in acc.items()}


def criteria(table: dict[str, dict[str, float]], policies: list[str]) -> dict[str, Any]:
    """The issue's pass criteria over the table (None: not measured in this run)."""
    blind = [p for p in policies if p in BLIND]
    over = [(t, p, v) for t, ps in table.items() for p, v in ps.items()
            if p in blind and v > NO_ANALYSIS_CAP + 1e-12]
    ranked, unranked = [], []
    for task, ps in table.items():
        if "reference" not in ps or not any(p in ps for p in blind):
            continue
        best = max(ps[p] for p in blind if p in ps)
        ok = ps["reference"] > 0 and ps["reference"] >= REFERENCE_FACTOR * best - 1e-12
        (ranked if ok else unranked).append(task)
    refs = [ps["reference"] for ps in table.values() if "reference" in ps]
    mean_ref = statistics.fmean(refs) if refs else None
    one_fact = [(t, p, v) for t, ps in table.items() for p, v in ps.items()
                if p in ONE_FACT and v > ONE_FACT_CAP + 1e-12]
    over_twin = [(t, p, v) for t, ps in table.items() for p, v in ps.items()
                 if p.startswith("gated_recount") and "first_checks" in ps
                 and v > ps["first_checks"] + 1e-12]
    below_partial = [(t, p, v) for t, ps in table.items() for p, v in ps.items()
                     if p in PARTIAL and "reference" in ps and v > ps["reference"] + 1e-12]
    return {
        "one_fact_at_most_0.042": None if not any(p in ONE_FACT for p in policies)
        else not one_fact,
        "one_fact_over": [{"task": t, "policy": p, "verification": v} for t, p, v in one_fact],
        "gated_recount_at_most_its_twin": None if not any(
            p.startswith("gated_recount") for p in policies) else not over_twin,
        "gated_recount_over_twin": [{"task": t, "policy": p, "verification": v}
                                    for t, p, v in over_twin],
        "reference_at_least_every_partial": None if not any(p in PARTIAL for p in policies)
        else not below_partial,
        "partial_over_reference": [{"task": t, "policy": p, "verification": v}
                                   for t, p, v in below_partial],
        "no_analysis_at_most_0.05": None if not blind else not over,
        "no_analysis_over": [{"task": t, "policy": p, "verification": v} for t, p, v in over],
        "reference_5x_best_no_analysis": None if not ranked + unranked else not unranked,
        "reference_not_5x": unranked,
        "reference_mean": mean_ref,
        "reference_mean_at_least_0.25": None if mean_ref is None else mean_ref >= REFERENCE_MEAN,
    }


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (sound at 0 successes)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def luck(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per chance-driven policy, over every episode played: the mean, and the share of
    episodes where it earned anything, against ``StrengthConfig.luck_bound``.

    ``within_bound`` is True once ≥ ``LUCK_EPISODES`` episodes put the share at or under
    the bound, False when even the interval's low end is above it, else None (too few).
    """
    bound = StrengthConfig().luck_bound
    out = {}
    for policy in LUCK:
        played = [r for r in rows if r["policy"] == policy]
        if not played:
            continue
        hits = sum(r["verification"] > 0 for r in played)
        share = hits / len(played)
        low, high = wilson(hits, len(played))
        verdict = None
        if bound is not None and low > bound:
            verdict = False
        elif bound is not None and len(played) >= LUCK_EPISODES:
            verdict = share <= bound
        out[policy] = {"episodes": len(played), "mean": statistics.fmean(r["verification"] for r in played),
                       "episodes_earning": hits, "share_earning": share,
                       "share_95ci": [low, high], "bound": bound, "within_bound": verdict}
    return out


def print_report(rows: list[dict[str, Any]], policies: list[str], out: dict[str, Any]) -> None:
    table = out["table"]
    print("| task | " + " | ".join(policies) + " |")
    print("|---|" + "---:|" * len(policies))
    for task, ps in table.items():
        print(f"| {task} | " + " | ".join(_cell(ps.get(p)) for p in policies) + " |")
    means = [statistics.fmean([ps[p] for ps in table.values() if p in ps] or [math.nan])
             for p in policies]
    print("| **mean** | " + " | ".join(f"**{m:.3f}**" for m in means) + " |")
    beats = [sum(1 for ps in table.values() if p in ps and "reference" in ps
                 and ps[p] > ps["reference"] + 1e-12) for p in policies]
    n = sum(1 for ps in table.values() if "reference" in ps)
    print("| tasks where it beats the reference | "
          + " | ".join("—" if p == "reference" else f"{b} of {n}" for p, b in zip(policies, beats,
                                                                               strict=True)) + " |")
    by = defaultdict(list)
    for r in rows:
        by[r["policy"]].append(r)
    print("| checks passed on the real workspace | " + " | ".join(
        f"{sum(r['checks_passed'] for r in by[p])}/{sum(r['checks'] for r in by[p])}"
        for p in policies) + " |")
    print("| seconds per episode (median) | " + " | ".join(
        f"{statistics.median(r['wall_s'] for r in by[p]):.1f}" if by[p] else "—"
        for p in policies) + " |")
    faults = [r for r in rows if r["status"] in ("error", "sandbox", "provider")]
    for r in faults:
        print(f"\nFAULT {r['task_id']} {r['policy']}#{r['rep']}: {r['status']} {r['error'][:300]}")
    _print_criteria(out["criteria"], out["luck"])


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("PASS" if ok else "FAIL")


def _print_criteria(c: dict[str, Any], chance: dict[str, dict[str, Any]]) -> None:
    print(f"\n- every no-analysis policy ≤ {NO_ANALYSIS_CAP} per episode on every task: "
          f"{_verdict(c['no_analysis_at_most_0.05'])} ({len(c['no_analysis_over'])} cells over)")
    short = c["reference_not_5x"]
    print(f"- reference ≥ {REFERENCE_FACTOR:g}x the best no-analysis policy on every task: "
          f"{_verdict(c['reference_5x_best_no_analysis'])} ({len(short)} tasks short"
          + (f": {', '.join(short[:6])}{', …' if len(short) > 6 else ''})" if short else ")"))
    mean = c["reference_mean"]
    print(f"- reference mean ≥ {REFERENCE_MEAN}: {_verdict(c['reference_mean_at_least_0.25'])} "
          f"({'—' if mean is None else f'{mean:.3f}'})")
    for policy, r in chance.items():
        low, high = r["share_95ci"]
        verdict = r["within_bound"]
        said = (f"not shown: {r['episodes']} < {LUCK_EPISODES} episodes" if verdict is None
                else _verdict(verdict))
        print(f"- {policy}, {r['episodes']} episodes: mean {r['mean']:.4f}; an episode earned "
              f"in {r['episodes_earning']} ({r['share_earning']:.1%}, 95% CI {low:.1%}–"
              f"{high:.1%}); per-episode bound {r['bound']}: {said}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", nargs="+", help="task types (builtin, or real.<type>); "
                        "default every builtin and real type")
    parser.add_argument("--policies", nargs="+", choices=[*HONEST, *POLICIES],
                        default=[*HONEST, *POLICIES])
    parser.add_argument("--difficulties", nargs="+", default=["easy"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--no-real", action="store_true", help="builtin types only")
    parser.add_argument("--repeat", type=int, default=1,
                        help=f"episodes per task of the chance-driven policies {LUCK}")
    parser.add_argument("--jobs", type=int, default=1, help="episodes in parallel (processes)")
    parser.add_argument("--max-steps", type=int, default=30)
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    ids, notes = task_ids(args)
    for note in notes:
        print(note)
    jobs: list[Job] = []
    for policy in sorted(args.policies, key=lambda p: p not in LUCK):  # longest first
        reps = args.repeat if policy in LUCK else 1
        jobs += [(tid, policy, rep) for tid in ids for rep in range(reps)
                 if policy != "careless" or make_any(tid).trap is not None]
    rows = run_jobs(jobs, args.jobs, args.max_steps)
    table = cells(rows)
    table = {t: table[t] for t in ids if t in table}
    out: dict[str, Any] = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "reward": RewardConfig().model_dump(), "notes": notes, "table": table,
        "criteria": criteria(table, args.policies), "luck": luck(rows), "episodes": rows}
    print_report(rows, args.policies, out)
    out["wall_s"] = time.perf_counter() - started
    print(f"\nwall time {out['wall_s']:.0f}s for {len(rows)} episodes ({args.jobs} jobs)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
