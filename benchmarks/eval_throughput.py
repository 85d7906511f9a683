"""Throughput of ``vera-env eval`` against a zero-latency model server.

With a server that answers instantly (the reference solutions, from
``tests/cli/openai_stub.py``, on 127.0.0.1), everything measured is the harness: the
sandbox running the commands and checks the "model" asked for, the HTTP round trip
through ``vera_env.llm``, and the bookkeeping (the rollout loop, the transcript files,
one fsync'd line per attempt). The script runs the real CLI path (``vera-env eval``,
in process) at several concurrency levels and reports:

* episodes per minute (the harness's ceiling: a real model only lowers it);
* per turn, where one episode's time went: sandbox (``env.reset``/``env.step``), model
  call (client + loopback + a server that does no work), and the rest;
* the harness overhead share at a given model latency: the time per turn that is
  neither the model nor the commands it asked for, over the whole turn.

Usage: python benchmarks/eval_throughput.py [--attempts 2] [--concurrency 1 2 4 8]
                                            [--latency-s 0 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "cli"))

from openai_stub import OracleServer  # noqa: E402

from vera_env.cli import main  # noqa: E402
from vera_env.evaluation.rundir import RunDir  # noqa: E402
from vera_env.llm import ChatClient  # noqa: E402
from vera_env.spec import EnvSpec  # noqa: E402
from vera_env.tasks import load_tasks  # noqa: E402

MAX_STEPS = 8


class Clock:
    """Thread-safe sums of durations by name."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.totals[name] = self.totals.get(name, 0.0) + seconds
            self.counts[name] = self.counts.get(name, 0) + 1


class TimedEnv(gym.Wrapper):
    """Times ``reset`` and ``step`` (the sandbox's share)."""

    def __init__(self, env: Any, clock: Clock) -> None:
        super().__init__(env)
        self.clock = clock

    def reset(self, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.env.reset(**kw)
        finally:
            self.clock.add("env", time.perf_counter() - started)

    def step(self, action: str) -> Any:
        started = time.perf_counter()
        try:
            return self.env.step(action)
        finally:
            self.clock.add("env", time.perf_counter() - started)
            self.clock.add("turns", 0.0)


def run_once(concurrency: int, attempts: int, clock: Clock, latency_s: float = 0.0
             ) -> dict[str, Any]:
    tasks = load_tasks("builtin")
    build_env, achat = EnvSpec.build, ChatClient.achat

    def timed_build(self: EnvSpec, *args: Any, **kw: Any) -> Any:
        return TimedEnv(build_env(self, *args, **kw), clock)

    async def timed_achat(self: ChatClient, *args: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return await achat(self, *args, **kw)
        finally:
            clock.add("model", time.perf_counter() - started)

    EnvSpec.build, ChatClient.achat = timed_build, timed_achat  # type: ignore[method-assign]
    try:
        with OracleServer(tasks, max_steps=MAX_STEPS, delay_s=latency_s) as server, \
                tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run"
            started = time.perf_counter()
            code = main(["eval", "--base-url", server.base_url, "--model", "stub",
                         "--attempts", str(attempts), "--concurrency", str(concurrency),
                         "--max-steps", str(MAX_STEPS), "--out", str(out)])
            wall = time.perf_counter() - started
            summary = json.loads((out / "summary.json").read_text())
            episode_s = sum(a.wall_s for a in RunDir(out).attempts())
    finally:
        EnvSpec.build, ChatClient.achat = build_env, achat  # type: ignore[method-assign]
    assert code == 0 and summary["accuracy"] == 1.0, summary["statuses"]
    turns = clock.counts.get("turns", 0)
    env_s, model_s = clock.totals.get("env", 0.0), clock.totals.get("model", 0.0)
    return {
        "concurrency": concurrency, "episodes": summary["attempts"], "turns": turns,
        "wall_s": round(wall, 2),
        "episodes_per_min": round(summary["attempts"] / wall * 60, 1),
        "ms_per_turn_sandbox": round(1000 * env_s / turns, 1),
        "ms_per_turn_model_call": round(1000 * model_s / turns, 1),
        # Inside episodes, neither sandbox nor model: the rollout loop, transcripts,
        # waiting for a worker thread or the event loop.
        "ms_per_turn_rest": round(1000 * max(episode_s - env_s - model_s, 0.0) / turns, 1),
        "slot_use": round(episode_s / (wall * concurrency), 2),
    }


def table(args: argparse.Namespace, latency_s: float) -> list[dict[str, Any]]:
    rows = []
    for concurrency in args.concurrency:
        runs = [run_once(concurrency, args.attempts, Clock(), latency_s)
                for _ in range(args.repeats)]
        row = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        row["concurrency"], row["episodes"] = concurrency, runs[0]["episodes"]
        rows.append(row)
    base = rows[0]
    print(f"\nmodel latency {latency_s:g} s per turn; median of {args.repeats} runs; builtin "
          f"tasks x {args.attempts} attempts, max {MAX_STEPS} steps, wrappers forced,gate\n")
    print("| concurrency | episodes | wall s | episodes/min | speed-up | sandbox ms/turn "
          "| model call ms/turn | rest ms/turn | slot use |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['episodes']} | {r['wall_s']} | "
              f"{r['episodes_per_min']} | {r['episodes_per_min'] / base['episodes_per_min']:.2f}x"
              f" | {r['ms_per_turn_sandbox']} | {r['ms_per_turn_model_call']} | "
              f"{r['ms_per_turn_rest']} | {r['slot_use']} |")
    return rows


def main_bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--latency-s", type=float, nargs="+", default=[0.0],
                        help="model latencies per turn to simulate (0: zero-latency server)")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for latency_s in args.latency_s:
        rows = table(args, latency_s)
        results[f"latency_{latency_s:g}s"] = rows
        if latency_s == 0:
            base = rows[0]
            overhead = base["ms_per_turn_model_call"] + base["ms_per_turn_rest"]
            results["overhead_ms_per_turn"] = overhead
            print(f"\nharness overhead per turn at concurrency 1 (model call round trip + "
                  f"rest, no sandbox): {overhead:.1f} ms")
            for model_s in (0.5, 2.0, 10.0):
                share = overhead / (overhead + base["ms_per_turn_sandbox"] + 1000 * model_s)
                print(f"  share of a turn with a model that takes {model_s:g} s: "
                      f"{100 * share:.1f}%")
    out = ROOT / "benchmarks" / "results" / "eval_throughput.json"
    out.parent.mkdir(exist_ok=True)
    merged = json.loads(out.read_text()) if out.exists() else {}   # other latencies kept
    out.write_text(json.dumps({**merged, **results}, indent=2) + "\n")


if __name__ == "__main__":
    main_bench()
