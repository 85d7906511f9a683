"""What the one episode runner costs per episode, over a bare reset/step loop.

Every runner now records episodes with the ``Attempt`` lifecycle and leases its
environments from an ``EnvPool``. That must cost nothing next to an episode: this
measures a five-turn scripted episode (a command, a node with three checks, a command, a
rejected turn, the answer) on the stub sandbox of ``harness_overhead.py`` (commands return
at once, strength off), so what is left is the harness and the runner:

* ``bare loop``: ``env.reset`` then ``env.step`` per turn, nothing recorded (baseline);
* ``run_episode``: the same env, through the Attempt lifecycle;
* ``run_many (pool)``: ``run_many(pool, ..., concurrency=1)``, one job per call;
* ``play_vector (1 env)``: a one-env ``SyncVectorEnv`` from ``make_vector_env``.

Usage::

    python benchmarks/runner_overhead.py [--n 300]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness_overhead import StubSandbox, node_turn
from sandbox_latency import machine, measure, summarize

from vera_env.env import VeraEnv
from vera_env.policy import ScriptedPolicy
from vera_env.rollout import EnvPool, run_episode, run_many
from vera_env.rollout.vector import make_vector_env, play_vector
from vera_env.tasks import Task
from vera_env.verification.rewards import RewardConfig

RESULTS = Path(__file__).resolve().parent / "results" / "runner_overhead.json"
TURNS = ("<command>wc -l table.tsv</command>", node_turn(1), "<command>ls</command>",
         "just thinking", "FINAL ANSWER: 1")


def make_env(tmp: Path) -> VeraEnv:
    task = Task(id="bench", question="How many rows?", answer="1", grader={"kind": "exact"})
    return VeraEnv([task], max_steps=10, sandbox=StubSandbox(tmp),
                   reward=RewardConfig(strength=False))


def bare(env: VeraEnv) -> None:
    env.reset(seed=0)
    for turn in TURNS:
        _, _, terminated, truncated, _ = env.step(turn)
        if terminated or truncated:
            return


def timed(fn: Callable[[], object], n: int) -> list[float]:
    return measure(fn, n, 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="episodes per row")
    args = parser.parse_args()
    policy = ScriptedPolicy(TURNS)
    with tempfile.TemporaryDirectory() as tmp:
        env = make_env(Path(tmp))
        pool = EnvPool(lambda: make_env(Path(tmp)))
        vector = make_vector_env(lambda: make_env(Path(tmp)), 1)
        rows = {
            "bare loop": summarize(timed(lambda: bare(env), args.n)),
            "run_episode": summarize(timed(lambda: run_episode(env, policy, seed=0), args.n)),
            "run_many (pool)": summarize(timed(
                lambda: run_many(pool, policy, [(None, 0)], concurrency=1), args.n)),
            "play_vector (1 env)": summarize(timed(
                lambda: play_vector(vector, policy, [0]), args.n)),
        }
        env.close()
        pool.close()
        vector.close()
    base = rows["bare loop"]["median_ms"]
    print(f"{machine()}\n\nfive-turn episode on a stub sandbox, n={args.n}\n")
    print("| runner | median ms | p90 ms | / bare loop |")
    print("|---|---:|---:|---:|")
    for name, row in rows.items():
        print(f"| {name} | {row['median_ms']:.3f} | {row['p90_ms']:.3f} | "
              f"{row['median_ms'] / base:.2f}x |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": machine(), "n": args.n, "rows": rows},
                                  indent=2) + "\n")


if __name__ == "__main__":
    main()
