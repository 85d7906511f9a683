"""GRPO on the verification reward: the trainer's own model plays VeraEnv episodes.

Run (CPU, no hub — a random tiny model, to check the plumbing; each phase is announced
on stderr as ``[grpo +Ns] ...``). Measured 2026-12-06 on the shared 2-core machine, with
the 6-step budget that was then the default: 2 min 14 s at load average 6.2 (start) to
4.7 (end); another run that day took 4 min 06 s at 2.5 to 4.8, and an earlier one
471 s, so expect 2 to 8 minutes:

    python -m vera_env.training.scripts.grpo --tiny --env-max-steps 6

The environment flags are ``vera_env.training.envs.EnvOptions``, whose defaults are the
package's: until 2026-12-07 this script declared its own, a 6-step budget and the
``forced`` wrapper alone, where it now plays 50 steps behind ``gate`` then ``forced``
(``--env-max-steps 6 --wrappers forced`` gives the old environment). Without
``--env-max-steps 6`` a ``--tiny`` run plays up to 50 turns an episode, about eight
times as long.

A real run (see training/README.md for the GPU recipe):

    python -m vera_env.training.scripts.grpo --model Qwen/Qwen2.5-1.5B-Instruct --use-vllm \\
        --vllm-mode colocate --bf16 --train-steps 200 --output-dir runs/grpo

Verification alone (correctness weighed 0: a guard, not a target), with a LoRA adapter
(``vera_env.training.adapters``; the output folder then holds the adapter alone):

    python -m vera_env.training.scripts.grpo --model BASE --adapter runs/sft --lora-rank 8 \
        --reward-weights 1 0 1 --output-dir runs/grpo

This file is the script, read top to bottom: its ``Args``, then loading the model
(``vera_env.training.models``, shared with ``sft``), the trainer's config and the
trainer, then ``main``. The library it drives: episodes are
played by one lockstep loop (``vera_env.training.lockstep``), each recorded as an
``Attempt``, and trained by ``vera_env.training.grpo_trainer.MultiTurnGRPOTrainer``. Two
layouts (``--layout``) pack the same loop's turns differently (``vera_env.training.packing``):

* ``stepwise`` (the default): every model turn is one sample whose prompt is exactly
  what an evaluation policy sees at that turn — the observation through
  ``vera_env.policies.chat``, prefill included — and whose completion is the turn as sampled.
  Advantages are group-relative per episode and broadcast to its turns
  (``--advantage reward_to_go`` credits each turn with the return from it on);
  unscorable episodes get no gradient; each episode weighs the same whatever its
  length (``vera_env.training.advantages``). A sample's context is bounded by the observation
  budget (``--state-budget`` and the env's command window), not by the turn index.
* ``episode``: each turn is sampled from the whole episode so far, and the episode is
  one sample with the env's tokens masked. The context grows by an observation per
  turn and differs from what evaluation shows; kept to compare the two.

The dataset is task starts (``{"task_id": ..., "seed": ...}``,
``vera_env.training.starts.build_dataset``); TRL repeats each
``num_generations`` times, so a group plays one task instance. Rewards are the env's
(``vera_env.training.rewards``), never read from the text; ``--reward-weights`` weighs
their three parts, and every logged step keeps the env's own reward (the parts summed)
as ``reward_default`` beside the weighted ``reward``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from vera_env.tasks import TaskSource
from vera_env.tasks.builtin.instance import Difficulty
from vera_env.training import models
from vera_env.training.adapters import LoraOptions
from vera_env.training.envs import EnvOptions, task_source
from vera_env.training.packing import LayoutName
from vera_env.training.phase_log import PhaseLog, main_process, trainer_callback
from vera_env.training.resume import RunOptions, fit, resume_point
from vera_env.training.rewards import DEFAULT_WEIGHTS, REWARD_FUNCS, check_reward_weights
from vera_env.training.starts import build_dataset

__all__ = ["REWARD_FUNCS", "Args", "build_trainer", "grpo_config", "load_model", "main"]


@dataclass
class Args(EnvOptions, RunOptions, LoraOptions):
    """GRPO through VeraEnv: step-wise samples (default) or whole episodes."""

    model: str = ""
    """Model folder or hub id to train (must have a chat template). Empty with --tiny."""
    tiny: bool = False
    """Build a random-weight tiny model and a locally trained tokenizer (CPU, no hub)."""
    output_dir: str = "runs/grpo"
    """Where checkpoints and the final model go."""
    layout: LayoutName = "stepwise"
    """stepwise: one sample per model turn, its prompt exactly the evaluation's
    observation; episode: one concatenated sequence per episode (observations masked)."""
    advantage: Literal["episode", "reward_to_go"] = "episode"
    """Advantages: the episode's, broadcast to every sample, or (step-wise only) each
    turn's return from it on (normalised over its group's turns)."""
    tasks: str = "builtin"
    """Task source: a named one -- 'builtin' (generated families), 'real', 'perturbed' or
    'canary' (real data), each drawn with --num-prompts seeds per type -- a suite folder or
    a .jsonl file."""
    difficulties: tuple[Difficulty, ...] = ("easy",)
    """Builtin difficulties to draw from (easy, medium, hard); the curriculum's rungs
    after warmup."""
    curriculum_start: Difficulty | None = None
    """--tasks curriculum: the rung every type begins on (default warmup). A warm start
    for a policy that already solves the lower rungs: their groups would be all right,
    zero advantage."""
    num_prompts: int = 256
    """Task starts in the dataset; a named source gets that many seeds per type (builtin
    seeds never repeat a task; real types have fewer distinct subjects than seeds)."""
    system_prompt: str = ""
    """System message before the (first) observation; give evaluation the same."""
    env_workers: int = 8
    """Threads stepping envs (sandbox commands run as subprocesses)."""
    num_generations: int = 4
    """Episodes per task start (the GRPO group)."""
    per_device_train_batch_size: int = 4
    """Episodes per device per optimizer micro-step."""
    steps_per_generation: int = 2
    """Optimizer micro-steps fed by one generation batch (it holds batch size x this episodes)."""
    gradient_accumulation_steps: int = 1
    """Micro-steps per optimizer step."""
    train_steps: int = 2
    """Optimizer steps to run."""
    learning_rate: float = 1e-6
    """AdamW learning rate."""
    lr_scheduler: Literal["linear", "constant", "cosine"] = "linear"
    """Learning-rate schedule over --train-steps (TRL's default: linear to 0). A run
    extended in chunks (--resume with a larger --train-steps) wants constant: each
    chunk's linear schedule ends at 0, so its last steps barely train."""
    beta: float = 0.0
    """KL coefficient against the initial model (0: no reference model; must be 0 with
    --lora-rank)."""
    reward_weights: tuple[float, float, float] = DEFAULT_WEIGHTS
    """Weights of the reward parts: verification, correctness, format (>= 0, not all
    0). '1 0 1' trains on verification and format alone; the env's reward (1 1 1) is
    logged beside as reward_default."""
    max_completion_length: int = 4096
    """Episode layout only: tokens after the first prompt, turns and observations
    together (an episode ends when the next observation would not fit). Step-wise, a
    sample's completion is one turn, bounded by --max-turn-tokens."""
    max_turn_tokens: int = 512
    """Tokens one model turn may sample (both layouts)."""
    temperature: float = 1.0
    """Sampling temperature."""
    use_vllm: bool = False
    """Sample with vLLM (needs a GPU and the vllm package)."""
    vllm_mode: Literal["colocate", "server"] = "colocate"
    """vLLM mode: colocate (same GPU as training) or server (`trl vllm-serve`)."""
    vllm_server_base_url: str = ""
    """vLLM server URL in server mode (default: TRL's, http://0.0.0.0:8000)."""
    vllm_gpu_memory_utilization: float = 0.35
    """Share of GPU memory vLLM may take in colocate mode."""
    vllm_max_model_length: int = 16384
    """vLLM context length: prompt plus max_completion_length must fit."""
    dump_rollouts: str = ""
    """Write one JSON line per turn (episode, group, task, turn, observation, decoded
    prompt, completion, advantage, reward parts) to this file."""
    print_samples: int = 0
    """Print this many episodes of every generation batch, turn by turn."""
    redraw_uninformative: int = 0
    """Before each optimizer step, replay up to this many times the groups whose rewards
    are all equal (no advantage) on redrawn tasks -- DAPO's dynamic sampling; the
    replaced episodes still update a curriculum and are dumped as redrawn, never trained.
    One process, --advantage episode."""
    save_final: bool = True
    """Save the trained model and tokenizer to output_dir at the end."""
    seed: int = 0
    """Seed of the dataset draw and of the trainer."""

    def __post_init__(self) -> None:
        """Refuse weights, LoRA options and combinations no run can use (``ValueError``)."""
        self.reward_weights = check_reward_weights(tuple(self.reward_weights))
        self.check_lora()
        if self.lora_rank and self.beta:
            raise ValueError("--beta > 0 with --lora-rank: the step-wise trainer computes no "
                             "reference model for a PEFT model; keep --beta 0")
        if self.lora_rank and self.trainable_layers:
            raise ValueError("--lora-rank and --trainable-layers both choose what trains; "
                             "give one")


def load_model(args: Args) -> tuple[Any, Any]:
    """The model and tokenizer named by ``args`` (a tiny local pair with ``--tiny``),
    ``--adapter`` folders merged in, wrapped in a fresh adapter with ``--lora-rank``;
    the tokenizer pads on the left (``vera_env.training.models``)."""
    if args.tiny and args.beta:
        # TRL rebuilds the reference model from the model's folder; this one has none.
        raise SystemExit("--beta > 0 needs a saved model: save one with "
                         "vera_env.training.tiny.build_tiny(FOLDER) and pass --model FOLDER")
    return models.load_model(args, padding_side="left")


def grpo_config(args: Args) -> Any:
    """The ``GRPOConfig`` for ``args``."""
    import torch  # noqa: PLC0415
    from trl import GRPOConfig  # noqa: PLC0415

    vllm: dict[str, Any] = {}
    if args.use_vllm:
        vllm = {"use_vllm": True, "vllm_mode": args.vllm_mode,
                "vllm_gpu_memory_utilization": args.vllm_gpu_memory_utilization,
                "vllm_max_model_length": args.vllm_max_model_length}
        if args.vllm_server_base_url:
            vllm["vllm_server_base_url"] = args.vllm_server_base_url
    return GRPOConfig(
        output_dir=args.output_dir, num_generations=args.num_generations,
        per_device_train_batch_size=args.per_device_train_batch_size,
        steps_per_generation=args.steps_per_generation,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        max_steps=args.train_steps, learning_rate=args.learning_rate,
        lr_scheduler_type=args.lr_scheduler, beta=args.beta,
        max_completion_length=(args.max_turn_tokens if args.layout == "stepwise"
                               else args.max_completion_length),
        temperature=args.temperature, reward_weights=list(args.reward_weights),
        bf16=args.bf16, use_cpu=not torch.cuda.is_available(),
        activation_checkpointing=args.activation_checkpointing, logging_steps=args.logging_steps,
        report_to=args.report_to, seed=args.seed, **args.checkpointing(), **vllm)


def build_trainer(args: Args, tasks: TaskSource, model: Any, tokenizer: Any, *,
                  log: PhaseLog | None = None) -> tuple[Any, Any]:
    """The trainer and the rollout it plays episodes with (both layouts: one loop).

    ``log``: where the rollout and the trainer say what they are doing (None: silent).
    """
    from vera_env.training.dump import RolloutDump  # noqa: PLC0415
    from vera_env.training.grpo_trainer import MultiTurnGRPOTrainer  # noqa: PLC0415
    from vera_env.training.lockstep import LockstepRollout  # noqa: PLC0415

    _, step = resume_point(args.output_dir, args.resume)
    dump = RolloutDump(args.dump_rollouts, resume_from=step) if args.dump_rollouts else None

    rollout = LockstepRollout(tasks, args.env_spec(), layout=args.layout,
                              max_turn_tokens=args.max_turn_tokens,
                              max_completion_length=args.max_completion_length,
                              env_workers=args.env_workers, system_prompt=args.system_prompt,
                              log=log)
    try:
        trainer = MultiTurnGRPOTrainer(
            model=model, reward_funcs=REWARD_FUNCS, args=grpo_config(args),
            train_dataset=build_dataset(tasks, args.num_prompts, seed=args.seed),
            processing_class=tokenizer, rollout=rollout, advantage=args.advantage,
            print_samples=args.print_samples, dump=dump, redraws=args.redraw_uninformative,
            log=log)
    except BaseException:
        rollout.close()
        raise
    if log is not None:
        trainer.add_callback(trainer_callback(log))
    return trainer, rollout


def main(args: Args) -> Any:
    """Train; returns the trainer (its ``state.log_history`` holds the metrics).

    Each phase is announced on stderr (``vera_env.training.phase_log``): a CPU run spends
    minutes in its first rollout before TRL's bar moves.
    """
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    log = PhaseLog("grpo", enabled=main_process())
    log(f"loading the task source ({args.tasks})")
    tasks = task_source(args.tasks, args.difficulties, args.num_prompts, args.curriculum_start)
    log("building the tiny model and tokenizer" if args.tiny
        else f"loading the model from {args.model}")
    model, tokenizer = load_model(args)
    log(f"model ready: {sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{sum(p.numel() for p in model.parameters() if p.requires_grad):,} trainable")
    if args.trainable_layers:
        from vera_env.training.layers import train_top_layers  # noqa: PLC0415

        print(f"training {train_top_layers(model, args.trainable_layers):,} parameters")
    log(f"starting the environments (sandbox {args.sandbox}) and the trainer")
    trainer, rollout = build_trainer(args, tasks, model, tokenizer, log=log)
    try:
        fit(trainer, args.output_dir, resume=args.resume, tasks=tasks)
    finally:
        rollout.close()
    if args.save_final:
        log(f"saving the model to {args.output_dir}")
        models.save_model(trainer, tokenizer, args, args.output_dir)
    log(f"done in {log.elapsed_s:.0f} s")
    return trainer


if __name__ == "__main__":
    from vera_env.training.arguments import parse_args

    main(parse_args(Args))
