"""``vera-env train SCRIPT [FLAGS]``: the training scripts as one command.

The scripts are the modules of ``vera_env.training.scripts`` (the repository's
``training/scripts/`` folder, shipped under the one import name): ``python -m
vera_env.training.scripts.grpo`` works too. They were documented as ``python -m
training.grpo``, which a user's own ``training/`` package shadows (run from such a
project it failed with "No module named training.grpo"), and a generic top-level
``training`` in site-packages could be overwritten by another distribution's; until
2026-12-07 they were modules of ``vera_env.training`` itself, beside the library they
drive. ``SCRIPT`` is the module's name either way. The environment must not import
torch or TRL, so the script is loaded here by name when the command runs, never at
import time (the import contracts).
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["SCRIPTS", "add_parser", "cmd_train"]

# What the training extra installs (pyproject.toml) and the scripts import lazily.
_TRAINING_EXTRA = frozenset({"torch", "transformers", "trl", "datasets", "accelerate", "tokenizers",
                             "peft", "safetensors", "huggingface_hub"})
SCRIPTS = {
    "grpo": "GRPO through the environment, turn by turn (TRL's GRPOTrainer)",
    "sft": "expert iteration: SFTTrainer on filtered collected rollouts",
    "collect": "rollouts of any policy to a datasets-loadable JSONL/Parquet file",
    "checkpoint": "a transformers checkpoint from a GGUF file, folder or wheel",
    "lora": "LoRA adapters merged into a base model, saved as a model folder",
    "throughput": "sampling throughput of a policy on the environment",
}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``vera-env train``."""
    lines = "\n".join(f"  {name:<11} {what}" for name, what in SCRIPTS.items())
    parser = sub.add_parser(
        "train", help="run a training script (needs the training extra)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=f"Run one of the training scripts; `vera-env train SCRIPT --help` lists "
                    f"its flags.\n\n{lines}")
    parser.add_argument("script", choices=list(SCRIPTS), metavar="SCRIPT",
                        help=", ".join(SCRIPTS))
    parser.add_argument("flags", nargs=argparse.REMAINDER, help="the script's own flags")
    parser.set_defaults(func=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    """Import the script's module and run its ``main`` on its own parsed flags."""
    try:
        module = importlib.import_module(f"vera_env.training.scripts.{args.script}")
        arguments = importlib.import_module("vera_env.training.arguments")
        options = arguments.parse_args(module.Args, args.flags,
                                       prog=f"vera-env train {args.script}")
        module.main(options)  # the scripts import torch and TRL when they start
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in _TRAINING_EXTRA:
            raise  # a bug of ours, not a missing extra
        print(f"vera-env train {args.script}: {exc}; it needs the training extra "
              "(make test installs it; see docs/training.md)", file=sys.stderr)
        return 2
    return 0
