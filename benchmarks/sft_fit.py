"""How well a checkpoint fits the teacher's turns it never saw, scored by teacher forcing.

The learning run's sampled episodes can fail in two ways that look the same in an
evaluation: the model never learned the teacher's command, or it learned almost every
token of it and one wrong token (a repeated clause, a dropped quote) breaks the awk.
This separates the two. Each model scores the teacher's own turns on held-out task
instances (``vera_env.training.scripts.collect --policy analyst --tasks <held-out suite>``), laid out as
the SFT saw them (``vera_env.training.scripts.sft``'s turns layout), and reports per turn index (0: the
command, 1: the node, 2: the answer):

- token accuracy: the share of label tokens that are the model's argmax;
- NLL: mean negative log-likelihood per label token;
- exact: the share of turns whose every label token is the argmax (greedy decoding would
  reproduce the turn, given a right prefix);
- median log p(turn): the log-probability of the whole turn, whose exponent is the
  chance that one sample at temperature 1 is the teacher's turn.

    python benchmarks/sft_fit.py --rollouts runs/heldout_analyst.jsonl \
        --model runs/lc4/model runs/lc4/sft runs/lc7/sft
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def score_model(model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> dict[int, dict]:
    """Teacher-forced fit of ``model`` on every turn of ``rows``, by turn index."""
    import torch

    from vera_env.training.transcripts import IGNORE, ChatFormat, tokenize_transcript

    fmt = ChatFormat(tokenizer)
    # Per turn index: (argmax hits, label tokens, log p of the turn), one per turn.
    turns: dict[int, list[tuple[int, int, float]]] = {}
    model.eval()
    for row in rows:
        sequences = tokenize_transcript(fmt, row["observations"], row["actions"], "turns",
                                        prefills=row.get("prefills") or ())
        for index, (ids, labels) in enumerate(sequences):
            with torch.no_grad():
                logits = model(torch.tensor([ids])).logits[0, :-1].float()
            target = torch.tensor(labels[1:])
            keep = target != IGNORE
            logp = torch.log_softmax(logits[keep], dim=-1)
            gold = target[keep]
            hits = int((logp.argmax(-1) == gold).sum())
            turns.setdefault(index, []).append(
                (hits, int(keep.sum()), float(logp.gather(1, gold[:, None]).sum())))
    table = {}
    for index, scored in sorted(turns.items()):
        tokens = sum(n for _, n, _ in scored)
        table[index] = {
            "turns": len(scored),
            "median_tokens": median(n for _, n, _ in scored),
            "token_accuracy": sum(hits for hits, _, _ in scored) / tokens,
            "nll": -sum(lp for _, _, lp in scored) / tokens,
            "exact": sum(hits == n for hits, n, _ in scored) / len(scored),
            "median_logp": median(lp for _, _, lp in scored),
        }
    return table


def load(folder: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return (AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32),
            AutoTokenizer.from_pretrained(folder))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", required=True, type=Path,
                        help="teacher episodes (vera_env.training.scripts.collect JSONL)")
    parser.add_argument("--model", nargs="+", required=True, help="checkpoint folders")
    parser.add_argument("--limit", type=int, default=0, help="score the first N episodes")
    parser.add_argument("--out", type=Path, default=None, help="write the table as JSON")
    args = parser.parse_args(argv)

    from vera_env.training.sft_data import load_rollouts, select_rows

    rows = select_rows(load_rollouts([args.rollouts]), "correct")
    rows = rows[:args.limit] if args.limit else rows
    result: dict[str, Any] = {"rollouts": str(args.rollouts), "episodes": len(rows), "models": {}}
    print(f"{len(rows)} teacher episodes from {args.rollouts}")
    print("| model | turn | turns | median tokens | token accuracy | NLL/token | exact "
          "| median log p(turn) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for folder in args.model:
        model, tokenizer = load(folder)
        table = score_model(model, tokenizer, rows)
        result["models"][folder] = table
        for index, t in table.items():
            print(f"| {folder} | {index} | {t['turns']} | {t['median_tokens']:.0f} | "
                  f"{t['token_accuracy']:.3f} | {t['nll']:.3f} | {t['exact']:.2f} | "
                  f"{t['median_logp']:.1f} |", flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
