"""Merge LoRA adapters into a base model and save the result as a model folder.

    vera-env train lora --model BASE --adapter runs/sft runs/grpo --output runs/merged
    python -m vera_env.training.scripts.lora --model BASE --adapter runs/sft --output runs/merged

A merged model is an ordinary ``transformers`` folder, what every policy and ``vera-env
eval`` read. The adapters themselves, and the ``--lora-rank`` / ``--adapter`` flags of
``sft`` and ``grpo``, are ``vera_env.training.adapters``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vera_env.training.adapters import save_merged

__all__ = ["Args", "main"]


@dataclass
class Args:
    """Merge LoRA adapters into a base model and save the result as a model folder."""

    model: str = ""
    """Base model folder."""
    adapter: tuple[str, ...] = ()
    """Adapter folders, merged in order."""
    output: str = "runs/merged"
    """Where the merged model and its tokenizer go."""


def main(args: Args) -> Path:
    """Merge and save; returns the output folder."""
    if not args.model or not args.adapter:
        raise SystemExit("give --model BASE and --adapter FOLDER [FOLDER ...]")
    return save_merged(args.model, args.adapter, args.output)


if __name__ == "__main__":
    from vera_env.training.arguments import parse_args

    print(main(parse_args(Args)))
