"""Expert iteration: fine-tune on the collected episodes that went well.

    python -m vera_env.training.scripts.sft --rollouts runs/teacher.parquet --model Qwen/Qwen2.5-1.5B-Instruct \\
        --select correct --output-dir runs/sft

Rejection sampling on the env's own verdicts: keep the episodes whose answer was graded
correct (``--select correct``), whose harness-executed verification reward reached a
threshold (``verified``), or either. Unscorable episodes and exclusions (provider or
sandbox faults) are never kept — nobody knows whether they went well.

Each kept episode is tokenized with the trained model's tokenizer (collected ids may
come from another one) in one of two layouts: ``turns`` (the default) — one sequence
per turn whose context is exactly what ``OpenAIChatPolicy``, ``TransformersPolicy``
and step-wise ``vera_env.training.scripts.grpo`` give the model (``vera_env.policies.chat``: system prompt,
observation, a forced answer's prefill) — or ``episode`` — the whole transcript as one
sequence, the context of ``vera_env.training.scripts.grpo --layout episode``. Either way
the loss is on the model's turns only: prompt and observation tokens are labelled -100
(``vera_env.training.transcripts.tokenize_transcript``), and ``SFTTrainer`` takes the
pre-tokenized ``input_ids`` and ``labels`` as they are.

This file is the script, read top to bottom (``Args``, the trainer's config, ``main``);
loading the model is ``vera_env.training.models`` (shared with ``grpo``), and loading,
selecting and tokenizing the rows ``vera_env.training.sft_data``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from vera_env.training.adapters import LoraOptions
from vera_env.training.models import load_model, save_model
from vera_env.training.phase_log import PhaseLog, main_process, trainer_callback
from vera_env.training.resume import RunOptions, fit
from vera_env.training.sft_data import Selection, load_rollouts, select_rows, to_examples
from vera_env.training.transcripts import ChatFormat, Layout


@dataclass
class Args(RunOptions, LoraOptions):
    """Supervised fine-tuning on selected collected rollouts."""

    rollouts: tuple[str, ...] = ("runs/rollouts.jsonl",)
    """Files written by vera_env.training.scripts.collect (.jsonl or .parquet)."""
    model: str = ""
    """Model folder or hub id to fine-tune. Empty with --tiny."""
    tiny: bool = False
    """Fine-tune a random-weight tiny model with a locally trained tokenizer (CPU, no hub)."""
    output_dir: str = "runs/sft"
    """Where the fine-tuned model goes."""
    select: Selection = "correct"
    """Keep episodes graded correct, with verification reward >= min_verification, or either."""
    min_verification: float = 0.1
    """Verification reward an episode needs under --select verified/either."""
    layout: Layout = "turns"
    """turns: one sequence per turn, its context exactly what an evaluation policy and
    step-wise GRPO show the model; episode: one sequence per episode (the concatenated
    GRPO layout)."""
    system_prompt: str = ""
    """System message in each turn's context (turns layout; use the one eval will use)."""
    max_length: int = 8192
    """Longer sequences are cut to this many tokens."""
    epochs: float = 1.0
    """Passes over the kept examples (ignored when train_steps > 0)."""
    train_steps: int = -1
    """Optimizer steps; -1 runs the epochs."""
    learning_rate: float = 1e-5
    """AdamW learning rate."""
    per_device_train_batch_size: int = 1
    """Sequences per device per micro-step."""
    gradient_accumulation_steps: int = 8
    """Micro-steps per optimizer step."""
    seed: int = 0
    """Seed of the trainer."""

    def __post_init__(self) -> None:
        """Refuse LoRA options no run can use (``ValueError``)."""
        self.check_lora()
        if self.lora_rank and self.trainable_layers:
            raise ValueError("--lora-rank and --trainable-layers both choose what trains; "
                             "give one")


def sft_config(args: Args) -> Any:
    """The ``SFTConfig`` for ``args``."""
    import torch  # noqa: PLC0415
    from trl import SFTConfig  # noqa: PLC0415

    return SFTConfig(
        output_dir=args.output_dir, num_train_epochs=args.epochs, max_steps=args.train_steps,
        learning_rate=args.learning_rate,
        per_device_train_batch_size=args.per_device_train_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps, max_length=None,
        bf16=args.bf16, use_cpu=not torch.cuda.is_available(),
        activation_checkpointing=args.activation_checkpointing,
        logging_steps=args.logging_steps, report_to=args.report_to, seed=args.seed,
        **args.checkpointing())


def main(args: Args) -> Any:
    """Select, tokenize, train, save; returns the trainer. Each phase is announced on
    stderr (``vera_env.training.phase_log``)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    log = PhaseLog("sft", enabled=main_process())
    from datasets import Dataset  # noqa: PLC0415
    from trl import SFTTrainer  # noqa: PLC0415

    log(f"loading {len(args.rollouts)} rollout file(s)")
    rows = load_rollouts(args.rollouts)
    kept = select_rows(rows, args.select, args.min_verification)
    if not kept:
        raise SystemExit(f"nothing to train on: none of the {len(rows)} episodes passed "
                         f"--select {args.select} (min verification {args.min_verification}); "
                         "collect more or relax --select")
    log("building the tiny model and tokenizer" if args.tiny
        else f"loading the model from {args.model}")
    model, tokenizer = load_model(args)
    if args.trainable_layers:
        from vera_env.training.layers import train_top_layers  # noqa: PLC0415

        print(f"training {train_top_layers(model, args.trainable_layers):,} parameters")
    log(f"tokenizing {len(kept)} episodes ({args.layout} layout)")
    examples = to_examples(kept, ChatFormat(tokenizer), layout=args.layout,
                           max_length=args.max_length, system_prompt=args.system_prompt)
    print(f"kept {len(kept)} of {len(rows)} episodes ({args.select}): "
          f"{len(examples)} sequences, {sum(len(e['input_ids']) for e in examples)} tokens")
    if not examples:
        raise SystemExit(f"nothing to train on: {len(kept)} episodes kept, none with a model "
                         f"turn within --max-length {args.max_length}; raise --max-length")
    log("starting the trainer")
    trainer = SFTTrainer(model=model, args=sft_config(args),
                         train_dataset=Dataset.from_list(examples), processing_class=tokenizer)
    trainer.add_callback(trainer_callback(log))
    fit(trainer, args.output_dir, resume=args.resume)
    log(f"saving the model to {args.output_dir}")
    save_model(trainer, tokenizer, args, args.output_dir)
    log(f"done in {log.elapsed_s:.0f} s")
    return trainer


if __name__ == "__main__":
    from vera_env.training.arguments import parse_args

    main(parse_args(Args))
