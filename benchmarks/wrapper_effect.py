"""How often an episode ends with no usable answer, with and without the wrappers.

The seed's largest measured loss was 22 of 73 problems (30%) ending with no usable
answer although the analysis was done. This script replays scripted behaviours that
reproduce those failure modes on every builtin task, under each wrapper combination,
and prints the share of episodes without a usable answer and the accuracy.

Behaviours (each does the task's reference analysis first, then):
- oracle: answers as the reference solution does;
- procrastinator: never commits on its own (keeps running commands);
- stub: ends with a bare ``FINAL ANSWER:`` stub;
- command-as-answer: gives its next shell command as the answer;
- hasty: answers at once with the trap's wrong answer and no analysis.
All but ``hasty`` answer correctly when the environment forces an answer (they are given
the prefill), as the seed's models did once asked.

Usage: python benchmarks/wrapper_effect.py [--max-steps 10] [--reserve 3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vera_env import info as keys
from vera_env.rollout import run_episode
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks

IDLE = "<command>ls</command>"
COMMAND_ANSWER = "FINAL ANSWER: awk -F'\\t' 'NR>1{print $2}' alcohol.txt | head -5"


class Behaviour:
    """Scripted policy: the reference analysis, then a fixed ending."""

    def __init__(self, tasks: Any, ending: str) -> None:
        self.tasks, self.ending = tasks, ending

    def act(self, observation: str, info: dict[str, Any]) -> str:
        task = self.tasks.get(info[keys.TASK_ID])
        if self.ending == "hasty":
            return f"FINAL ANSWER: {task.trap.wrong_answer}"
        if info[keys.FORCING]:
            return info[keys.PREFILL] + task.answer
        analysis = list(task.solution[:-1])
        step = info[keys.STEP]
        if step < len(analysis):
            return analysis[step]
        return {"oracle": task.solution[-1], "procrastinator": IDLE,
                "stub": "FINAL ANSWER:", "command": COMMAND_ANSWER}[self.ending]


def measure(max_steps: int, reserve: int) -> list[dict[str, Any]]:
    """Run every behaviour × wrapper set × builtin task; one row per pair."""
    tasks = load_tasks("builtin")
    rows = []
    for ending in ("oracle", "procrastinator", "stub", "command", "hasty"):
        for wrappers in ((), ("forced",), ("gate",), ("gate", "forced")):
            spec = EnvSpec(max_steps=max_steps, wrappers=wrappers, reserve=reserve)
            env = spec.build(tasks=tasks)
            attempts = [run_episode(env, Behaviour(tasks, ending), task_id=t.id, seed=0)
                        for t in tasks]
            env.close()
            n = len(attempts)
            rows.append({
                "behaviour": ending, "wrappers": "+".join(wrappers) or "none",
                "no_usable_answer": sum(not a.answer for a in attempts) / n,
                "accuracy": sum(bool(a.correct) for a in attempts) / n,
                "gated": sum(a.gated for a in attempts), "episodes": n,
            })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--reserve", type=int, default=3)
    args = parser.parse_args()
    rows = measure(args.max_steps, args.reserve)
    print(f"max_steps={args.max_steps}, reserve={args.reserve}, builtin tasks\n")
    print("| behaviour | wrappers | no usable answer | accuracy | answers withheld |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['behaviour']} | {r['wrappers']} | {r['no_usable_answer']:.0%} | "
              f"{r['accuracy']:.0%} | {r['gated']} |")
    out = Path(__file__).parent / "results" / "wrapper_effect.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
