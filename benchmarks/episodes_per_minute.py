"""Episodes per minute against parallel envs (1-16): sync vs async vs Ray vs threads.

The oracle policy (each builtin task's reference solution, no model) plays episodes of
the 13 builtin tasks, drawn by seed, through the real environment and sandbox (strength
testing off unless ``--strength``: its variant runs are not in the floor, and
``benchmarks/strength_cost.py`` measures them against theirs; ``--strength both`` plays
every cell with strength off and then on, in one run, so the two rates compare). For each
number of parallel envs N:

* ``sync``: ``gym.make_vec(..., vectorization_mode="sync")`` + ``vera_env.rollout.vector.play_vector``
  (one process; sub-envs step one after the other);
* ``async``: the same with ``vectorization_mode="async"`` (one worker process per env);
* ``ray``: a ``vera_env.rollout.distributed.RolloutPool`` of N single-env actors on a local Ray,
  warmed by one round of N episodes first (a training loop starts its workers once;
  the start, a few seconds per actor here, is reported apart as ``ray_start_s``);
* ``threads``: ``vera_env.rollout.run_many(concurrency=N)`` (one process, N threads).

Memory per env: the peak PSS (proportional set size: a page shared by k processes
counts 1/k in each) of the processes holding the envs — the process itself for sync and
threads (growth over its start), the worker processes for async, the actors for Ray —
sampled every 0.2 s, divided by N. Ray runs last, so the async workers are not forked
from a process that has Ray loaded.

Floor: what the episodes' own commands and checks cost as bare ``bash -c`` subprocesses
run one after the other on a copy of the data (strength testing's mutant re-runs
excluded), times the machine's cores: no harness can play these episodes faster.

Usage::

    python benchmarks/episodes_per_minute.py [--envs 1,2,4,8,16] [--modes sync,async,threads,ray]
                                            [--strength [on|off|both]] [--sandbox bwrap-server]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
from sandbox_latency import machine

import vera_env
from vera_env.rollout import Attempt, run_many
from vera_env.rollout.vector import EnvInfo, close_vector_env, play_vector
from vera_env.tasks import load_tasks
from vera_env.wire.protocol import parse_emission

RESULTS = Path(__file__).resolve().parent / "results" / "episodes_per_minute.json"
ROOT = Path(__file__).resolve().parents[1]
MAX_STEPS = 20
ENV_KWARGS: dict[str, Any] = {"max_steps": MAX_STEPS}


def oracle() -> Any:
    from vera_env.policies import OraclePolicy

    return OraclePolicy(load_tasks("builtin"))


def episodes_for(n: int, minimum: int) -> list[int]:
    return list(range(max(minimum, 2 * n)))


def run_vector(mode: str, n: int, seeds: list[int]) -> tuple[list[Attempt], float]:
    envs = gym.make_vec(vera_env.ENV_ID, num_envs=n, vectorization_mode=mode,
                        wrappers=[EnvInfo], tasks="builtin", **ENV_KWARGS)
    try:
        return play_vector(envs, oracle(), seeds), 0.0
    finally:
        close_vector_env(envs)


def run_threads(n: int, seeds: list[int]) -> tuple[list[Attempt], float]:
    def make() -> Any:
        return gym.make(vera_env.ENV_ID, tasks="builtin", **ENV_KWARGS)

    return run_many(make, oracle(), [(None, s) for s in seeds], concurrency=n), 0.0


def run_ray(n: int, seeds: list[int]) -> tuple[list[Attempt], float]:
    """Attempts of a warm pool, and the seconds spent starting and warming it."""
    import ray

    from vera_env.rollout.distributed import RolloutPool

    started = time.perf_counter()
    if not ray.is_initialized():
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    from vera_env.spec import EnvSpec

    spec = EnvSpec(tasks="builtin", wrappers=(), **ENV_KWARGS)
    with RolloutPool(spec, oracle, n,
                     num_cpus_per_worker=(os.cpu_count() or 1) / n) as pool:
        pool.collect([(None, 10_000 + i) for i in range(n)])  # every actor up and warm
        setup = time.perf_counter() - started
        return pool.collect([(None, s) for s in seeds]).attempts, setup


class PeakRss:
    """Samples the PSS of the processes holding the envs; keeps the peak."""

    def __init__(self, mode: str) -> None:
        self._mode = mode
        self._stop = threading.Event()
        self._baseline = _pss_kb(os.getpid()) if mode in ("sync", "threads") else 0
        self.peak_kb = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self.peak_kb = max(self.peak_kb, self._sample())

    def _sample(self) -> int:
        if self._mode in ("sync", "threads"):
            return _pss_kb(os.getpid()) - self._baseline
        if self._mode == "async":
            return sum(_pss_kb(pid) for pid in _children(os.getpid()))
        return sum(_pss_kb(pid) for pid in _pids_with(b"RolloutWorker"))


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                if int(handle.read().rsplit(b")", 1)[1].split()[1]) == pid:
                    found.append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _pids_with(needle: bytes) -> list[int]:
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if needle in handle.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def floor_seconds() -> float:
    """Mean wall time of one builtin oracle episode's commands and checks, run bare."""
    tasks = load_tasks("builtin")
    spent = []
    for task_id in tasks.ids():
        task = tasks.get(task_id)
        with tempfile.TemporaryDirectory() as tmp:
            for name, source in task.data_files().items():
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, Path(tmp) / name)
            started = time.perf_counter()
            for turn in task.solution:
                emission = parse_emission(turn)
                for command in [emission.command] + [c.command for c in emission.checks]:
                    if command:
                        subprocess.run(["bash", "-c", command], cwd=tmp, capture_output=True,
                                       check=False)
            spent.append(time.perf_counter() - started)
    return sum(spent) / len(spent)


def measure(mode: str, n: int, minimum: int, strength: bool) -> dict[str, Any]:
    from vera_env.verification.rewards import RewardConfig

    ENV_KWARGS["reward"] = RewardConfig(strength=strength)
    runners: dict[str, Callable[[int, list[int]], tuple[list[Attempt], float]]] = {
        "sync": lambda k, s: run_vector("sync", k, s),
        "async": lambda k, s: run_vector("async", k, s),
        "threads": run_threads, "ray": run_ray,
    }
    seeds = episodes_for(n, minimum)
    with PeakRss(mode) as rss:
        started = time.perf_counter()
        attempts, setup_s = runners[mode](n, seeds)
        wall = time.perf_counter() - started - setup_s
    ok = sum(a.status == "ok" and a.correct is True for a in attempts)
    verification = sum(a.verification_reward or 0.0 for a in attempts) / len(attempts)
    return {"mode": mode, "envs": n, "episodes": len(seeds), "ok_correct": ok,
            "strength": strength, "mean_verification": verification,
            "wall_s": wall, "episodes_per_minute": 60 * len(seeds) / wall,
            "mb_per_env": rss.peak_kb / 1024 / n, "ray_start_s": setup_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="1,2,4,8,16")
    parser.add_argument("--modes", default="sync,async,threads,ray")
    parser.add_argument("--min-episodes", type=int, default=8)
    parser.add_argument("--strength", nargs="?", const="on", default="off",
                        choices=["off", "on", "both"])
    parser.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "bwrap-server"])
    args = parser.parse_args()
    modes = args.modes.split(",")
    ENV_KWARGS["sandbox"] = args.sandbox
    settings = {"off": [False], "on": [True], "both": [False, True]}[args.strength]
    floor_s = floor_seconds()
    cores = os.cpu_count() or 1
    floor_epm = 60 * cores / floor_s
    rows = [measure(mode, int(n), args.min_episodes, strength)
            for mode in modes for n in args.envs.split(",") for strength in settings]
    print(f"| envs | mode | strength | episodes | ok | mean verification | episodes/min | "
          f"/ floor | MB per env (PSS) | pool start s |  "
          f"(floor: {floor_s * 1e3:.0f} ms of bare commands per episode x {cores} cores "
          f"= {floor_epm:.0f}/min)")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['envs']} | {row['mode']} | {'on' if row['strength'] else 'off'} | "
              f"{row['episodes']} | {row['ok_correct']} | {row['mean_verification']:.3f} | "
              f"{row['episodes_per_minute']:.1f} | {row['episodes_per_minute'] / floor_epm:.2f} | "
              f"{row['mb_per_env']:.0f} | {row['ray_start_s']:.1f} |")
    suffix = {"off": "", "on": "_strength", "both": "_strength_both"}[args.strength] + (
        "_server" if args.sandbox == "bwrap-server" else "")
    out = RESULTS.with_name(f"episodes_per_minute{suffix}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "strength": args.strength,
                               "sandbox": args.sandbox,
                               "floor_episode_s": floor_s,
                               "floor_episodes_per_minute": floor_epm, "max_steps": MAX_STEPS,
                               "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
