"""Observation size per step, steps 1-50: the bounded render against transcript replay.

A harness that replays the whole transcript sends, at step t, the first prompt plus
every turn and every tool output so far: its input grows linearly and the model pays
for it at every step (the seed measured 9,267 tokens per step of replay to deliver ~400
new ones). VeraEnv's observation is bounded: the question, the files, the protocol, the
analysis graph within ``state_budget`` tokens and the last 4 commands. This plays one
50-step episode of a scripted analysis of ``tab.sentinel_mean.easy.s0`` (realistic
exploration commands, a node every fifth step), and at each step counts the tokens
(``vera_env.observation.budget.count_tokens``) of:

* the bounded observation the environment returned;
* the transcript replay of the same episode (first observation + every action and
  tool output, as chat turns);
* the floor, the tokens of what is new at that step (the action and its output): no
  harness can tell the model less and still show it what happened.

Usage::

    python benchmarks/observation_size.py [--steps 50]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sandbox_latency import machine

from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.observation.budget import count_tokens
from vera_env.tasks import load_tasks
from vera_env.verification.rewards import RewardConfig

RESULTS = Path(__file__).resolve().parent / "results" / "observation_size.json"
TASK = "tab.sentinel_mean.easy.s0"
SHOWN = (1, 2, 5, 10, 20, 30, 40, 50)

EXPLORE = (
    "head -20 penguins.csv",
    "cat codebook.txt",
    "wc -l penguins.csv",
    "cut -d, -f2 penguins.csv | sort | uniq -c",
    "awk -F, 'NR>1 && $6==-999' penguins.csv | head -20",
    "awk -F, 'NR>1 {print $6}' penguins.csv | sort -n | head -30",
    "grep -c Adelie penguins.csv",
    "awk -F, 'NR>1 && $2==\"Adelie\" && $6!=-999 {s+=$6; n++} END {print s/n, n}' penguins.csv",
    "tail -25 penguins.csv",
    "cut -d, -f3,7 penguins.csv | sort | uniq -c | sort -rn",
)


def turn(step: int) -> str:
    command = EXPLORE[step % len(EXPLORE)]
    text = f"Looking at the data again (step {step}).\n<command>{command}</command>\n"
    if step % 5 == 4:
        text += (f'NODE kind=qc summary="finding {step}: Adelie rows without -999 counted" '
                 f"artifact=penguins.csv\n"
                 f'CHECK range "rows {step}" :: test $(wc -l < penguins.csv) -gt {step} '
                 f"&& echo True || echo False\n")
    return text


def play(steps: int) -> list[dict[str, int]]:
    env = VeraEnv(load_tasks("builtin"), max_steps=steps, reward=RewardConfig(strength=False))
    obs, _ = env.reset(options={"task_id": TASK})
    transcript = count_tokens(obs)
    rows = []
    try:
        for step in range(steps):
            action = turn(step)
            obs, _, terminated, truncated, info = env.step(action)
            new = count_tokens(action) + count_tokens(info[keys.COMMAND_OUTPUT] + info[keys.NUDGE])
            transcript += new
            rows.append({"step": step + 1, "bounded_tokens": count_tokens(obs),
                         "bounded_chars": len(obs), "transcript_tokens": transcript,
                         "floor_tokens": new})
            if terminated or truncated:
                break
    finally:
        env.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    rows = play(args.steps)
    print("| step | bounded obs tokens | transcript replay tokens | replay / bounded | "
          "new at this step (floor) | bounded / floor |")
    print("|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        if row["step"] in SHOWN or row is rows[-1]:
            print(f"| {row['step']} | {row['bounded_tokens']} | {row['transcript_tokens']} | "
                  f"{row['transcript_tokens'] / row['bounded_tokens']:.2f}x | "
                  f"{row['floor_tokens']} | {row['bounded_tokens'] / row['floor_tokens']:.1f}x |")
    cumulative_bounded = sum(r["bounded_tokens"] for r in rows)
    cumulative_replay = sum(r["transcript_tokens"] for r in rows)
    print(f"\nwhole episode, tokens the model reads: bounded {cumulative_bounded}, "
          f"replay {cumulative_replay} ({cumulative_replay / cumulative_bounded:.2f}x)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"task": TASK, "machine": machine(), "rows": rows,
                                   "episode_bounded_tokens": cumulative_bounded,
                                   "episode_replay_tokens": cumulative_replay},
                                  indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
