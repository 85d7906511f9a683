"""Tokens per training sample by turn, in the step-wise and the concatenated GRPO layouts.

Both layouts are built by the training code itself from one played 30-turn episode
(the scripted exploration of ``observation_size.py`` on ``tab.sentinel_mean.easy.s0``,
a node every fifth turn): step-wise, the sample of turn ``t`` is
``vera_env.policies.chat.prompt_ids`` of that turn's observation plus the turn
(``vera_env.training.lockstep``); concatenated, it is the whole sequence up to turn ``t``
(``vera_env.training.transcripts.ChatFormat``: first observation, then every turn and observation).
The memory of a training pass grows with its longest sequence, so "the longest
episode a layout can train under the same memory" is read off as the last turn whose
sample fits a per-sequence budget (``--budget``, default 8192 tokens, the README's GPU
recipe). Tokens are counted with SmolLM2's tokenizer (``--tokenizer``, a checkpoint
folder from ``vera_env.training.scripts.checkpoint``) or the tiny one.

Usage::

    python benchmarks/training_layouts.py [--turns 30] [--tokenizer runs/smollm2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "training_layouts.json"
SHOWN = (1, 10, 20, 30)


def play(turns: int, variant: str) -> tuple[list[str], list[str], list[str]]:
    """(observations, prefills, actions) of one scripted episode of ``turns`` turns."""
    from observation_size import TASK, turn

    from vera_env.tasks import load_tasks
    from vera_env.training.envs import EnvOptions, make_env
    from vera_env.verification.rewards import RewardConfig

    env = make_env(load_tasks("builtin"),
                   EnvOptions(env_max_steps=turns, wrappers=("forced",), reserve=1,
                              observation_variant=variant),
                   reward=RewardConfig(strength=False))
    obs, info = env.reset(options={"task_id": TASK})
    observations, prefills, actions = [], [], []
    for step in range(turns):
        prefill = info.get("prefill") or ""
        action = prefill + "6.4" if prefill else turn(step)
        observations.append(obs)
        prefills.append(prefill)
        actions.append(action)
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    env.close()
    return observations, prefills, actions


def sizes(tokenizer: object, observations: list[str], prefills: list[str],
          actions: list[str]) -> list[dict[str, int]]:
    from vera_env.policies.chat import prompt_ids
    from vera_env.training.transcripts import ChatFormat

    fmt = ChatFormat(tokenizer)
    rows, total = [], 0
    for t, (obs, prefill, action) in enumerate(zip(observations, prefills, actions, strict=False)):
        completion = len(fmt.encode(action[len(prefill):])) + 1
        stepwise = len(prompt_ids(tokenizer, obs, prefill=prefill)) + completion
        total += len(fmt.first(obs) if t == 0 else fmt.observation(obs)) + completion
        rows.append({"turn": t + 1, "stepwise": stepwise, "concatenated": total})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--budget", type=int, default=8192)
    parser.add_argument("--tokenizer", default="")
    args = parser.parse_args()
    if args.tokenizer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    else:
        from vera_env.training.tiny import tiny_tokenizer

        tokenizer = tiny_tokenizer()
    report = {"tokenizer": args.tokenizer or "tiny", "budget": args.budget, "variants": {}}
    print(f"tokens per training sample (tokenizer {report['tokenizer']})")
    print(f"{'variant':8} {'layout':13} " + " ".join(f"{'t=' + str(t):>7}" for t in SHOWN)
          + f" {'longest under ' + str(args.budget):>20}")
    for variant in ("full", "compact"):
        rows = sizes(tokenizer, *play(args.turns, variant))
        entry = {"rows": rows}
        for layout in ("stepwise", "concatenated"):
            fits = [r["turn"] for r in rows if r[layout] <= args.budget]
            longest = len(rows) if len(fits) == len(rows) else (fits[-1] if fits else 0)
            bounded = layout == "stepwise" and len(fits) == len(rows)
            entry[layout] = {"longest_episode": f">= {longest}" if bounded else longest,
                             "max_sample": max(r[layout] for r in rows)}
            shown = " ".join(f"{rows[t - 1][layout]:>7}" if t <= len(rows) else f"{'-':>7}"
                             for t in SHOWN)
            print(f"{variant:8} {layout:13} {shown} {entry[layout]['longest_episode']!s:>20}")
        report["variants"][variant] = entry
    RESULTS.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
