"""Harness overhead per step, the command excluded, at 1, 50 and 500 nodes in the graph.

What a step costs besides running shell: parsing the turn, the checks' bookkeeping
(verdicts, node, reward), listing the workspace and rendering the bounded observation.
To measure only that, the environment runs on a stub sandbox whose commands return at
once (a check prints ``True``), with strength testing off (its cost is the mutant runs:
``benchmarks/strength_cost.py``). For each graph size the graph is first grown to that
many nodes, then N steps of each kind are timed:

* ``command``: a turn with one command and no node;
* ``render``: the observation alone (``render_step_prompt`` + clipping);
* ``node``: a turn declaring a node with three checks (the graph is put back to its
  size after each timed turn, so every sample sees the same graph).

Floor: the cheapest real command the step could have run, ``bash -c true`` as a bare
subprocess (fork+exec), measured in the same run: the ratio says how many of those the
harness costs. Target: median under 1 ms at 50 nodes.

Usage::

    python benchmarks/harness_overhead.py [--n 200]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import tempfile
import time
from pathlib import Path

from sandbox_latency import machine, measure, summarize

from vera_env.env import VeraEnv
from vera_env.sandbox import ExecResult
from vera_env.tasks import Task
from vera_env.verification.rewards import RewardConfig

RESULTS = Path(__file__).resolve().parent / "results" / "harness_overhead.json"
SIZES = (1, 50, 500)


class StubWorkspace:
    """A workspace whose commands take no time: what is left is the harness."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult:
        return ExecResult("gene\tcount\nA\t3\n", "", 0, False, 0.0)

    def run_check(self, command: str, *, timeout_s: float | None = None,
                  overlay: object = None) -> ExecResult:
        return ExecResult("True\n", "", 0, False, 0.0)

    def listing(self) -> list[str]:
        return ["table.tsv"]

    def close(self) -> None:
        pass

    def __enter__(self) -> StubWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class StubSandbox:
    name = "stub"

    def __init__(self, path: Path) -> None:
        self.path = path

    def stage(self, files: object) -> StubWorkspace:
        return StubWorkspace(self.path)


def node_turn(i: int) -> str:
    return (f"<command>awk 'NR>1' table.tsv | wc -l > rows{i}.txt</command>\n"
            f'NODE kind=transform summary="finding number {i}" artifact=rows{i}.txt parents=n1\n'
            f'CHECK range "rows {i}" :: test $(cat rows{i}.txt) -eq {i} && echo True || echo False\n'
            f'CHECK conservation "cols {i}" :: test $(head -1 table.tsv | wc -w) -eq 2 && echo True\n'
            f'CHECK type "ints {i}" :: awk \'NR>1 && $2 !~ /^[0-9]+$/ {{bad=1}} '
            f'END{{print !bad ? "True" : "False"}}\' table.tsv\n')


COMMAND_TURN = "<command>awk -F'\\t' 'NR>1 {s+=$2} END {print s}' table.tsv</command>"


def node_turns(env: VeraEnv, size: int, n: int) -> list[float]:
    """Wall seconds of ``n`` node turns, each on the same ``size``-node graph."""
    episode = env._episode
    samples = []
    for i in range(n + 5):
        saved = copy.deepcopy((episode.state, episode.ledger))
        started = time.perf_counter()
        env.step(node_turn(size + i))
        samples.append(time.perf_counter() - started)
        episode.state, episode.ledger = saved
    return samples[5:]


def run_size(size: int, n: int, tmp: Path) -> dict[str, object]:
    task = Task(id="bench", question="How many rows?", answer="1",
                grader={"kind": "exact"}, data_dir=None)
    env = VeraEnv([task], max_steps=size + 3 * n + 20, sandbox=StubSandbox(tmp),
                  reward=RewardConfig(strength=False))
    env.reset(seed=0)
    for i in range(size):
        env.step(node_turn(i))
    assert len(env.state.nodes) == size
    rows = {
        "command": summarize(measure(lambda: env.step(COMMAND_TURN), n, 5)),
        "render": summarize(measure(env.observe, n, 5)),
        "node": summarize(node_turns(env, size, n)),
    }
    obs = env.observe()
    env.close()
    return {"nodes": size, "observation_chars": len(obs), **rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args()
    floor = summarize(measure(lambda: subprocess.run(["bash", "-c", "true"], check=True),
                              args.n, 5))["median_ms"]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_size(size, args.n, Path(tmp)) for size in SIZES]
    print(f"| nodes | step kind | median ms | p90 ms | / fork+exec of true |  "
          f"(N={args.n}; floor `bash -c true` = {floor:.2f} ms)")
    print("|---:|---|---:|---:|---:|")
    for row in rows:
        for kind in ("command", "render", "node"):
            stats = row[kind]
            print(f"| {row['nodes']} | {kind} | {stats['median_ms']:.3f} | "
                  f"{stats['p90_ms']:.3f} | {stats['median_ms'] / floor:.2f}x |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"n": args.n, "floor_bash_true_ms": floor,
                                   "machine": machine(), "rows": rows}, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
