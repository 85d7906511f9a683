"""The environment's share of a training step: env CPU and wall per turn beside a GPU.

A GRPO-style trainer generates a turn for every episode in flight, then steps the
environment; if the environment's time per turn rivals the generation round's, the GPU
waits. This drives N episodes at once through the async path (``vera_env.rollout.arun_many``,
``concurrency=N``) with a stand-in policy: the oracle's turns (each task's reference
solution), each answered after ``--delay-s`` (default 2 s: a generation round of 32
episodes at 16 turns/s), awaited on the event loop so the delay holds no env thread.
Strength testing is on (the default ``RewardConfig``, controls included), on the
default backend. The 13 builtin easy tasks are played in turn.

Per N it reports:

* **env CPU-s per turn**: this process's CPU time plus its reaped children's (every
  sandbox, ``resource.getrusage``), over the run, divided by the turns played (the
  stand-in policy's CPU is an ``asyncio.sleep``: nothing);
* **env wall per turn**: each ``env.step``'s wall time, median and mean (measured by a
  wrapper around the env);
* **overlap**: of the wall time in which some env step ran, the share during which some
  episode was also "generating" (its delay running) — env time hidden behind the GPU —
  and the share of the run in which no episode was generating (the GPU would idle);
* **turns/s** reached against the ideal N / delay (the env free);
* **cores to keep pace with 16 turns/s** = env CPU-s per turn x 16, extrapolated from
  what one turn costs here (the machine's cores are shared: load average printed).

Usage::

    python benchmarks/env_share.py [--n 8,32] [--delay-s 2] [--waves 1]

Prints a markdown table and writes ``benchmarks/results/env_share.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym
from sandbox_latency import machine

from vera_env.policy import OraclePolicy
from vera_env.rollout import arun_many
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks
from vera_env.verification.rewards import RewardConfig

RESULTS = Path(__file__).resolve().parent / "results" / "env_share.json"
TURNS_PER_S = 16.0
Interval = tuple[float, float]


class Timeline:
    """Wall intervals of env steps and of generation delays, from every thread."""

    def __init__(self) -> None:
        self.steps: list[Interval] = []
        self.generation: list[Interval] = []
        self._lock = threading.Lock()

    def add(self, kind: str, start: float, end: float) -> None:
        with self._lock:
            (self.steps if kind == "step" else self.generation).append((start, end))


class TimedEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Records each ``step``'s wall interval on the shared timeline."""

    def __init__(self, env: gym.Env[Any, Any], timeline: Timeline) -> None:
        super().__init__(env)
        self._timeline = timeline

    def step(self, action: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self._timeline.add("step", started, time.perf_counter())


class DelayedOracle(OraclePolicy):
    """The oracle's turns, each after ``delay_s`` on the event loop (a generation round)."""

    def __init__(self, tasks: Any, delay_s: float, timeline: Timeline) -> None:
        super().__init__(tasks)
        self._delay_s, self._timeline = delay_s, timeline

    async def aact(self, observation: str, info: dict[str, Any]) -> str:
        started = time.perf_counter()
        await asyncio.sleep(self._delay_s)
        self._timeline.add("generation", started, time.perf_counter())
        return self.act(observation, info)


def merged(intervals: list[Interval]) -> list[Interval]:
    """The union of ``intervals`` as sorted, disjoint intervals."""
    out: list[Interval] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def length(intervals: list[Interval]) -> float:
    return sum(end - start for start, end in intervals)


def intersection(a: list[Interval], b: list[Interval]) -> float:
    """Length of the intersection of two unions (each sorted and disjoint)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def cpu_s() -> tuple[float, float, float, float]:
    """CPU seconds (user, system) of this process, then of its reaped children (the
    sandboxes): system time is where process and namespace setup shows."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime, own.ru_stime, kids.ru_utime, kids.ru_stime


def run_n(n: int, delay_s: float, waves: int, strength: bool = True) -> dict[str, Any]:
    """``n`` episodes in flight (``waves`` x ``n`` in all), measured (module docstring)."""
    source = load_tasks("builtin")
    ids = [tid for tid in source.ids() if tid.endswith(".easy.s0")]
    timeline = Timeline()
    spec = EnvSpec(reward=RewardConfig(strength=strength))

    def make() -> gym.Env[Any, Any]:
        return TimedEnv(spec.build(tasks=source), timeline)

    policy = DelayedOracle(source, delay_s, timeline)
    jobs: list[tuple[str | None, int | None]] = [(ids[i % len(ids)], i)
                                                 for i in range(n * waves)]
    load_before = os.getloadavg()
    cpu0, wall0 = cpu_s(), time.perf_counter()
    attempts = asyncio.run(arun_many(make, policy, jobs, concurrency=n))
    wall, cpu1 = time.perf_counter() - wall0, cpu_s()
    d = [after - before for before, after in zip(cpu0, cpu1, strict=True)]
    return summarize(n, delay_s, timeline, wall, sum(d), attempts) | {
        "cpu_self_s": d[0] + d[1], "cpu_children_s": d[2] + d[3],
        "cpu_user_sys_s": {"self_user": d[0], "self_sys": d[1], "children_user": d[2],
                           "children_sys": d[3]},
        "load_before": load_before, "load_after": os.getloadavg()}


def summarize(n: int, delay_s: float, timeline: Timeline, wall: float, cpu: float,
              attempts: list[Any]) -> dict[str, Any]:
    turns = len(timeline.steps)
    step_s = [end - start for start, end in timeline.steps]
    env_union, gen_union = merged(timeline.steps), merged(timeline.generation)
    env_busy = length(env_union)
    hidden = intersection(env_union, gen_union)
    per_turn_cpu = cpu / turns if turns else float("nan")
    scores = [a.score for a in attempts if a.score is not None]
    return {"n": n, "delay_s": delay_s, "episodes": len(attempts), "turns": turns,
            "scorable_turns": sum(a.n_steps for a in attempts if a.score is not None),
            "wall_s": wall, "cpu_s": cpu, "cpu_s_per_turn": per_turn_cpu,
            "step_wall_median_s": statistics.median(step_s) if step_s else None,
            "step_wall_mean_s": statistics.fmean(step_s) if step_s else None,
            "step_wall_max_s": max(step_s, default=None),
            "env_busy_s": env_busy, "env_hidden_share": hidden / env_busy if env_busy else 0.0,
            "gpu_idle_share": 1 - length(gen_union) / wall if wall else 0.0,
            "turns_per_s": turns / wall if wall else 0.0, "ideal_turns_per_s": n / delay_s,
            "cores_for_16_turns_per_s": per_turn_cpu * TURNS_PER_S,
            "mean_score": statistics.fmean(scores) if scores else None,
            "unscorable": sum(a.score is None for a in attempts),
            "faults": sorted({_fault(a)[:160] for a in attempts if a.score is None}),
            "steps_per_episode_max": max((a.n_steps for a in attempts), default=0),
            "step_errors": dict(Counter((s.error or "")[:120] for a in attempts
                                        for s in a.steps if s.error).most_common(8))}


def _fault(attempt: Any) -> str:
    """Why an episode is unscorable: the attempt's error or its steps' ``error``."""
    if attempt.error:
        return str(attempt.error)
    return next((s.error for s in attempt.steps if s.error), "?")


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| N | episodes (unscorable) | turns | run s | env CPU-s / turn | env wall / turn, median (mean) s "
          "| env time hidden by generation | run with no generation (GPU idle) | turns/s "
          "(ideal) | cores for 16 turns/s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']} | {r['episodes']} ({r['unscorable']}) | {r['turns']} | {r['wall_s']:.1f} | "
              f"{r['cpu_s_per_turn']:.2f} | {r['step_wall_median_s']:.2f} "
              f"({r['step_wall_mean_s']:.2f}) | {r['env_hidden_share']:.0%} | "
              f"{r['gpu_idle_share']:.0%} | {r['turns_per_s']:.2f} ({r['ideal_turns_per_s']:.1f}) "
              f"| {r['cores_for_16_turns_per_s']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="8,32", help="episodes in flight, comma-separated")
    parser.add_argument("--delay-s", type=float, default=2.0)
    parser.add_argument("--waves", type=int, default=1, help="episodes played = waves x N")
    parser.add_argument("--strength", choices=("on", "off"), default="on")
    args = parser.parse_args()
    results = RESULTS if args.strength == "on" else RESULTS.with_name("env_share_off.json")
    out: dict[str, Any] = {"machine": machine(), "rows": []}
    for n in (int(x) for x in args.n.split(",")):
        out["rows"].append(run_n(n, args.delay_s, args.waves, args.strength == "on"))
        r = out["rows"][-1]
        print(f"N={n}: {r['turns']} turns in {r['wall_s']:.1f} s, CPU {r['cpu_self_s']:.1f} s "
              f"(harness) + {r['cpu_children_s']:.1f} s (sandboxes), load {r['load_after']}",
              flush=True)
        results.parent.mkdir(parents=True, exist_ok=True)  # partial results survive a stop
        results.write_text(json.dumps(out, indent=1) + "\n")
    print_table(out["rows"])
    for r in out["rows"]:
        if r["unscorable"]:
            print(f"N={r['n']}: {r['unscorable']} episodes unscorable: {r['faults'][:2]}")
    print(f"\nwrote {results}")


if __name__ == "__main__":
    main()
