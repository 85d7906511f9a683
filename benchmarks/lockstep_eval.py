"""Evaluate a local checkpoint on fixed task ids with batched, lockstep generation.

Why. ``vera-env eval --policy transformers`` plays each episode on its own, one
``generate`` per turn; batching should pay where a batch of eight costs about what one
row does (a GPU; on two CPU cores a 135M model generated three times as many tokens per
second in a batch of eight as alone, ``/work/shared/notes/REAL_MODEL.md``). Here the
episodes of a batch advance together: every round one left-padded greedy ``generate``
samples the next turn of every live episode (``vera_env.training.lockstep.play_lockstep``, the
loop step-wise GRPO samples with), and the prompts are the ones ``TransformersPolicy``
builds (``vera_env.policies.chat.prompt_ids`` through ``vera_env.training.packing.TurnPacking``), so the
records are those ``vera-env eval`` would write.

Measured on this CPU it lost: 824 s for 8 episodes x 3 turns x 128 tokens against 405 s
for ``vera-env eval --concurrency 4`` (``docs/benchmarks/learning.md``, "The training loop's costs"). A
round lasts as long as its longest turn -- every row generates until all have stopped,
and the padded rows still cost attention -- where threads let short turns finish early.
``benchmarks/learning_curve.py --eval-backend lockstep`` uses it; measure again on a GPU.

    python benchmarks/lockstep_eval.py MODEL seq.gc_content.easy.s100000 ... --batch 8
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class GreedySampler:
    """``vera_env.training.lockstep.Sampler`` over a plain model: one batched greedy generate."""

    def __init__(self, model: Any, pad_id: int, eos_ids: set[int]) -> None:
        self.model, self.pad_id, self.eos_ids = model, pad_id, eos_ids

    def __call__(self, contexts: list[list[int]], max_new_tokens: int
                 ) -> list[tuple[list[int], list[float] | None]]:
        import torch

        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):  # left padding: each row continues
            ids[row, width - len(context):] = torch.tensor(context)
            mask[row, width - len(context):] = 1
        ids, mask = ids.to(self.model.device), mask.to(self.model.device)
        with torch.no_grad():
            out = self.model.generate(input_ids=ids, attention_mask=mask, do_sample=False,
                                      max_new_tokens=max_new_tokens, pad_token_id=self.pad_id,
                                      use_cache=True)
        turns: list[tuple[list[int], list[float] | None]] = []
        for row in out[:, width:].cpu().tolist():
            cut = next((i + 1 for i, tok in enumerate(row) if tok in self.eos_ids), len(row))
            turns.append((row[:cut], None))
        return turns


def play_heldout(model_dir: Path, ids: list[str], *, batch: int = 16, max_new_tokens: int = 96,
                 max_steps: int = 3, reserve: int = 1, threads: int = 2,
                 timings: dict[str, float] | None = None) -> list[Any]:
    """One greedy episode per task id (reset seed 0), ``batch`` in lockstep at a time.

    Returns:
        The finished ``Attempt`` records, in the order of ``ids``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vera_env.tasks.builtin import make_task
    from vera_env.tasks.source import TaskSource
    from vera_env.training.envs import EnvOptions, make_env
    from vera_env.training.lockstep import play_lockstep
    from vera_env.training.packing import TurnPacking
    from vera_env.training.starts import Start
    from vera_env.training.transcripts import ChatFormat

    torch.set_num_threads(threads)
    gpu = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.bfloat16 if gpu else torch.float32).to("cuda" if gpu else "cpu")
    model.eval()
    eos_ids = ChatFormat(tokenizer).eos_ids
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    sampler = GreedySampler(model, pad, set(eos_ids))
    packing = TurnPacking(tokenizer, eos_ids, max_new_tokens)
    source = TaskSource(name="heldout", ids=tuple(ids), factory=make_task)
    attempts = []
    with ThreadPoolExecutor(4) as pool:
        for first in range(0, len(ids), batch):
            chunk = ids[first:first + batch]
            envs = [make_env(source, EnvOptions(
                env_max_steps=max_steps, wrappers=("gate", "forced"), reserve=reserve,
                observation_variant="compact")) for _ in chunk]
            try:
                episodes = play_lockstep(envs, [Start(t, 0) for t in chunk], sampler, packing,
                                         tokenizer, pool=pool, timings=timings)
            finally:
                for env in envs:
                    env.close()
            attempts += [e.attempt for e in episodes]
    return attempts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("ids", nargs="+")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--max-steps", type=int, default=3)
    args = parser.parse_args()
    timings: dict[str, float] = {}
    started = time.perf_counter()
    attempts = play_heldout(args.model, args.ids, batch=args.batch,
                            max_new_tokens=args.max_new_tokens, max_steps=args.max_steps,
                            timings=timings)
    print(json.dumps({"episodes": len(attempts), "wall_s": round(time.perf_counter() - started, 1),
                      **{k: round(v, 1) for k, v in timings.items()},
                      "turns": sum(a.n_steps for a in attempts),
                      "correct": sum(a.correct is True for a in attempts)}))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
