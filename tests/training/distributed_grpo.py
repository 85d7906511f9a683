"""One step-wise GRPO step in each of several processes (run by ``accelerate launch``).

Launched by ``test_distributed.py``. Each group has one scripted member that answers
the task right at once and one played by the tiny model, so groups' rewards differ and
the gradient is not zero. Every process writes ``rank<k>.json``: world size, the
samples it trained, its logged loss, and a checksum of its parameters before and after
(DDP must leave every process with the same weights).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from training_turns import TWO_TURN_RUN, answer_at_once, train_scripted

from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import make_task
from vera_env.training.arguments import parse_args
from vera_env.training.scripts import grpo
from vera_env.training.tiny import tiny_model, tiny_tokenizer

TASKS = ("tab.sentinel_mean.easy.s0", "seq.gc_content.easy.s0")


def checksum(model) -> float:
    return float(sum(p.detach().double().sum().item() for p in model.parameters()))


def main(out: Path) -> None:
    tasks = TaskSource([make_task(t) for t in TASKS])
    plans = answer_at_once(tasks)
    args = parse_args(grpo.Args, [*TWO_TURN_RUN, "--num-prompts", "2", "--train-steps", "1",
                                  "--output-dir", str(out), "--no-save-final"])
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer)
    before = checksum(model)
    trainer = train_scripted(args, tasks, model, tokenizer, plans)
    logged = next(h for h in trainer.state.log_history if "loss" in h)
    rank = trainer.accelerator.process_index
    (out / f"rank{rank}.json").write_text(json.dumps({
        "rank": rank, "world": trainer.accelerator.num_processes,
        "backend": str(trainer.accelerator.state.backend),
        "episodes": [e.start.task_id for e in trainer.last_episodes],
        "turns": sum(len(e.turns) for e in trainer.last_episodes),
        "loss": logged["loss"], "samples": logged["stepwise/samples"],
        "zero_std": logged["frac_reward_zero_std"],
        "before": before, "after": checksum(trainer.accelerator.unwrap_model(trainer.model))}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
