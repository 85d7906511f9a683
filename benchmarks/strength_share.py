"""Strength runs shared between episodes: how many are redundant, and what sharing saves.

Two parts, one JSON (``benchmarks/results/strength_share.json``):

* **Redundancy** (``--redundancy``): episodes played one after another in this process
  (the oracle, and the careless policy where a task has a trap), GRPO-shaped: groups of
  ``--group`` episodes of one task, ``--groups`` groups per task. Every strength run is
  keyed as the verdict store keys it (``verdicts.VerdictKey``: the check's text, a digest
  of what it can read on the variant, the sandbox) by a store that never serves, and
  counted as *already decided* within its episode, its group, or its task (any earlier
  episode of the same task in the process). Confirmations (never served) are counted
  apart, and so are runs whose text the store's screen refuses (``shareable``).
* **Unrelated, one at a time** (``--pairs ID,...``): each task played with the store
  off then on, one episode at a time: the episode's CPU and the store's own cost.
* **Load** (``--load``): ``N`` episodes in flight through ``arun_many``, the oracle
  answering after ``--delay-s`` (``env_share.py``'s machinery), jobs in groups of ``G``
  episodes of one task; strength off, on with the store off, on with the store on (the
  store emptied first), in the same run. Per row: env CPU-s per turn (``getrusage``,
  this process and its reaped children), episodes per minute, cores for 16 turns/s,
  mean score, and the store's served/missed counts. ``G = 1`` is a load of unrelated
  episodes (every episode another task or seed: the store can only cost).

Usage::

    python benchmarks/strength_share.py [--redundancy] [--load] [--n 8,32] [--g 4,8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gymnasium as gym
from env_share import DelayedOracle, TimedEnv, Timeline, cpu_s, summarize
from sandbox_latency import machine

from vera_env.policy import OraclePolicy, careless_policy
from vera_env.rollout import arun_many
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks
from vera_env.verification.rewards import RewardConfig
from vera_env.verification.strength import session as strength_session
from vera_env.verification.strength import verdicts
from vera_env.verification.strength.verdicts import (
    VerdictKey,
    VerdictStore,
    process_store,
    shareable,
)

RESULTS = Path(__file__).resolve().parent / "results" / "strength_share.json"
TURNS_PER_S = 16.0


# ----- redundancy -----

class Ledger:
    """Every keyed strength run, with the episode it belongs to (module docstring)."""

    def __init__(self) -> None:
        self.where: tuple[str, int, int] = ("", 0, 0)  # task, group, episode
        self.runs: list[dict[str, Any]] = []
        self._seen: dict[str, set[tuple[object, ...]]] = {"episode": set(),
                                                            "group": set(), "task": set()}

    def note(self, key: VerdictKey, how: str) -> None:
        task, group, episode = self.where
        marks = {"episode": (task, group, episode, key), "group": (task, group, key),
                 "task": (task, key)}
        row = {scope: marks[scope] in self._seen[scope] for scope in marks}
        for scope, mark in marks.items():
            self._seen[scope].add(mark)
        self.runs.append(row | {"confirm": how == "confirm",
                                "shareable": shareable(key.command)})


@contextmanager
def patched(changes: list[tuple[object, str, object]]) -> Iterator[None]:
    """Attributes set for the block (``owner, name, value``), restored after."""
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in changes]
    for owner, name, value in changes:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in originals:
            setattr(owner, name, value)


def keyed_everything(ledger: Ledger) -> Any:
    """A store that keys every run and serves none, in place of the process store."""
    store = VerdictStore(min_runs=10**9)
    store.trace = ledger.note
    import vera_env.episode as episode_module
    return patched([(strength_session, "shareable", lambda _command: True),  # refused too
                    (episode_module, "process_store", lambda: store)])


def redundancy(policy_name: str, ids: list[str], groups: int, group: int) -> dict[str, Any]:
    source = load_tasks("builtin")
    tasks = [source.get(t) for t in ids]
    policy = OraclePolicy(source) if policy_name == "oracle" else careless_policy(tasks)
    ledger = Ledger()
    env = EnvSpec().build(tasks=source)
    scores: list[float] = []
    with keyed_everything(ledger):
        for task in tasks:
            if policy_name == "careless" and not task.trap:
                continue
            for g in range(groups):
                for e in range(group):
                    ledger.where = (task.id, g, e)
                    obs, info = env.reset(options={"task_id": task.id})
                    done, total = False, 0.0
                    while not done:
                        obs, r, term, trunc, info = env.step(policy.act(obs, info))
                        total, done = total + float(r), term or trunc
                    scores.append(total)
    env.close()
    runs = ledger.runs
    first = [r for r in runs if not r["confirm"]]

    def share(rows: list[dict[str, Any]], scope: str) -> float | None:
        return round(sum(r[scope] for r in rows) / len(rows), 3) if rows else None
    return {"policy": policy_name, "tasks": ids, "groups_per_task": groups, "group": group,
            "episodes": len(scores), "returns": sorted(set(round(s, 4) for s in scores)),
            "strength_runs": len(runs), "confirmation_runs": len(runs) - len(first),
            "shareable_text_share": share(runs, "shareable"),
            "decided_before": {scope: {"all_runs": share(runs, scope),
                                       "non_confirmation_runs": share(first, scope),
                                       "non_confirmation_shareable": share(
                                           [r for r in first if r["shareable"]], scope)}
                               for scope in ("episode", "group", "task")}}


# ----- unrelated episodes, one at a time -----

def unrelated_pairs(ids: list[str]) -> list[dict[str, Any]]:
    """Each task once with the store off, then once on (a task and seed no episode of
    the process played before: nothing to share), one at a time: the episode's CPU
    (``getrusage``, with its sandboxes) and the store's own cost (reading trees and
    hashing views, thread CPU)."""
    source = load_tasks("builtin")
    policy = OraclePolicy(source)
    spent = {"view_cpu_s": 0.0}
    originals = verdicts.read_tree, verdicts.file_part, verdicts.Tree.view

    def timed(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent["view_cpu_s"] += time.thread_time() - started
        return wrapper
    rows = []
    with patched([(verdicts, "read_tree", timed(originals[0])),
                  (verdicts, "file_part", timed(originals[1])),
                  (verdicts.Tree, "view", timed(originals[2]))]):
        for tid in ids:
            for store in (False, True):
                spent["view_cpu_s"] = 0.0
                env = EnvSpec(reward=RewardConfig(strength={"share_verdicts": store})).build(
                    tasks=source)
                cpu0 = sum(cpu_s())
                obs, info = env.reset(options={"task_id": tid})
                done, total = False, 0.0
                while not done:
                    obs, r, term, trunc, info = env.step(policy.act(obs, info))
                    total, done = total + float(r), term or trunc
                env.close()
                rows.append({"task": tid, "store": store, "return": round(total, 4),
                             "episode_cpu_s": round(sum(cpu_s()) - cpu0, 3),
                             "view_cpu_s": round(spent["view_cpu_s"], 4)})
                print(rows[-1], flush=True)
    return rows


# ----- load -----

def load_run(n: int, group: int, delay_s: float, strength: bool, store: bool,
             ids: list[str]) -> dict[str, Any]:
    """``n`` episodes in flight, jobs in groups of ``group`` of one task (1: every
    episode another task, or seed once the easy tasks are used up)."""
    source = load_tasks("builtin")
    timeline = Timeline()
    spec = EnvSpec(reward=RewardConfig(strength={"share_verdicts": store} if strength else None))

    def make() -> gym.Env[Any, Any]:
        return TimedEnv(spec.build(tasks=source), timeline)

    if group == 1:
        jobs: list[tuple[str | None, int | None]] = [
            (ids[i % len(ids)].replace(".s0", f".s{i // len(ids)}"), i) for i in range(n)]
    else:
        jobs = [(ids[(i // group) % len(ids)], i) for i in range(n)]
    process_store().clear()
    policy = DelayedOracle(source, delay_s, timeline)
    load_before = os.getloadavg()
    cpu0, wall0 = cpu_s(), time.perf_counter()
    attempts = asyncio.run(arun_many(make, policy, jobs, concurrency=n))
    wall, cpu1 = time.perf_counter() - wall0, cpu_s()
    cpu = sum(after - before for before, after in zip(cpu0, cpu1, strict=True))
    row = summarize(n, delay_s, timeline, wall, cpu, attempts)
    stats = process_store().stats
    return {"n": n, "group": group, "strength": strength, "store": store,
            "episodes": row["episodes"], "unscorable": row["unscorable"],
            "turns": row["turns"], "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "cpu_s_per_turn": round(row["cpu_s_per_turn"], 4),
            "episodes_per_min": round(60 * len(attempts) / wall, 2),
            "cores_for_16_turns_per_s": round(row["cpu_s_per_turn"] * TURNS_PER_S, 2),
            "mean_score": row["mean_score"], "step_wall_median_s": row["step_wall_median_s"],
            "served": stats.served, "missed": stats.missed, "poisoned": stats.poisoned,
            "faults": row["faults"], "load_before": load_before,
            "load_after": os.getloadavg()}


def print_load(rows: list[dict[str, Any]]) -> None:
    print("| N | G | strength | store | episodes (unscorable) | CPU-s / turn | episodes/min "
          "| cores for 16 turns/s | mean score | served / asked |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        asked = r["served"] + r["missed"]
        print(f"| {r['n']} | {r['group']} | {'on' if r['strength'] else 'off'} "
              f"| {'on' if r['store'] else 'off'} | {r['episodes']} ({r['unscorable']}) "
              f"| {r['cpu_s_per_turn']:.3f} | {r['episodes_per_min']:.1f} "
              f"| {r['cores_for_16_turns_per_s']:.1f} | {r['mean_score']} "
              f"| {r['served']} / {asked} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redundancy", action="store_true")
    parser.add_argument("--load", action="store_true")
    parser.add_argument("--pairs", default="", help="task ids for unrelated_pairs")
    parser.add_argument("--tasks", default="seq.motif_count.easy.s0,vcf.het_count.easy.s0")
    parser.add_argument("--groups", type=int, default=2, help="groups per task (redundancy)")
    parser.add_argument("--group", type=int, default=4, help="episodes per group (redundancy)")
    parser.add_argument("--n", default="8,32")
    parser.add_argument("--g", default="4,8", help="group sizes of the load (1: unrelated)")
    parser.add_argument("--delay-s", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    ids = args.tasks.split(",")
    out: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    out["machine"] = machine()
    if args.redundancy:
        out["redundancy"] = [redundancy(p, ids, args.groups, args.group)
                             for p in ("oracle", "careless")]
        print(json.dumps(out["redundancy"], indent=1))
    if args.pairs:
        out["unrelated_pairs"] = unrelated_pairs(args.pairs.split(","))
    if args.load:
        easy = [t for t in load_tasks("builtin").ids() if t.endswith(".easy.s0")]
        rows = []
        for n in (int(x) for x in args.n.split(",")):
            for g in (int(x) for x in args.g.split(",")):
                for strength, store in ((False, False), (True, False), (True, True)):
                    if g == 1 and not strength:
                        continue
                    rows.append(load_run(n, g, args.delay_s, strength, store, easy))
                    print_load(rows[-1:])
        out["load"] = out.get("load", []) + rows
        print_load(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=str))
    scores = [r["mean_score"] for r in out.get("load", []) if r["mean_score"] is not None]
    if scores:
        print("mean scores:", round(statistics.fmean(scores), 4))


if __name__ == "__main__":
    main()
