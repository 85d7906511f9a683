"""GRPO on the verification reward: the trainer's own model plays VeraEnv episodes.

Run (CPU, no hub, about half a minute — a random tiny model, to check the plumbing):

    python -m training.grpo --tiny

A real run (see training/README.md for the GPU recipe):

    python -m training.grpo --model Qwen/Qwen2.5-1.5B-Instruct --use-vllm \\
        --vllm-mode colocate --bf16 --train-steps 200 --output-dir runs/grpo

How it fits TRL. ``GRPOTrainer(rollout_func=...)`` hands this script the prompts of a
generation batch, each repeated ``num_generations`` times in a row; every prompt here
is a task start (``{"task_id": ..., "seed": ...}``) drawn from a task source, so all
members of a group play the same task instance. Each element becomes one whole
episode in its own env, sampled turn by turn with the trainer's model and returned as
token ids with ``env_mask`` (1 on sampled tokens, 0 on observations; see
``training.episodes``). The reward is what the env measured, split into three reward
functions (verification, correctness, format) that read it from extra rollout fields —
never from the decoded text. An infrastructure fault (sandbox, or a grader that cannot
decide) makes every reward function return ``None``: TRL then gives that episode zero
advantage and leaves it out of its group's baseline, where a fake 0 would have
rewarded or punished the model for an outage.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from training.episodes import (
    ChatFormat,
    Sampler,
    TokenEpisode,
    draw_starts,
    format_start,
    parse_start,
    play_episodes,
)
from vera_env import VeraEnv
from vera_env.verification.rewards import RewardConfig
from vera_env.tasks import TaskSource, load_tasks
from vera_env.wrappers import apply_wrappers


@dataclass
class Args:
    """GRPO through VeraEnv with TRL's rollout_func."""

    model: str = ""
    """Model folder or hub id to train (must have a chat template). Empty with --tiny."""
    tiny: bool = False
    """Build a random-weight tiny model and a locally trained tokenizer (CPU, no hub)."""
    output_dir: str = "runs/grpo"
    """Where checkpoints and the final model go."""
    tasks: str = "builtin"
    """Task source: 'builtin' (generated families, unlimited seeds), a suite folder or a .jsonl file."""
    difficulties: tuple[str, ...] = ("easy",)
    """Builtin difficulties to draw from (easy, medium, hard)."""
    num_prompts: int = 256
    """Distinct task starts in the dataset; builtin tasks get fresh seeds, so none repeats."""
    env_max_steps: int = 6
    """Step budget of one episode (turns the model may take)."""
    wrappers: tuple[str, ...] = ("forced",)
    """Env wrappers, innermost first: 'forced' (ForcedAnswer), 'gate' (EmissionGate)."""
    sandbox: str = "auto"
    """Sandbox backend: auto, bwrap or local (local is not isolation)."""
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
    beta: float = 0.0
    """KL coefficient against the initial model (0: no reference model)."""
    max_completion_length: int = 4096
    """Tokens after the prompt: model turns and observations together."""
    max_turn_tokens: int = 512
    """Tokens one model turn may sample."""
    temperature: float = 1.0
    """Sampling temperature."""
    use_vllm: bool = False
    """Sample with vLLM (needs a GPU and the vllm package)."""
    vllm_mode: str = "colocate"
    """vLLM mode: colocate (same GPU as training) or server (`trl vllm-serve`)."""
    vllm_server_base_url: str = ""
    """vLLM server URL in server mode (default: TRL's, http://0.0.0.0:8000)."""
    vllm_gpu_memory_utilization: float = 0.35
    """Share of GPU memory vLLM may take in colocate mode."""
    vllm_max_model_length: int = 16384
    """vLLM context length: prompt plus max_completion_length must fit."""
    bf16: bool = False
    """Train in bfloat16 (GPU)."""
    activation_checkpointing: bool = False
    """Recompute activations in the backward pass (long episodes on a small GPU)."""
    logging_steps: int = 1
    """Log every this many optimizer steps."""
    report_to: str = "none"
    """Where to report metrics: none, tensorboard, wandb."""
    save_final: bool = True
    """Save the trained model and tokenizer to output_dir at the end."""
    seed: int = 0
    """Seed of the dataset draw and of the trainer."""


# ----- the dataset: task starts -----

def build_dataset(tasks: TaskSource, num_prompts: int, *, seed: int = 0) -> Any:
    """A ``datasets.Dataset`` of task starts: columns ``prompt``, ``task_id``, ``seed``.

    Draws without replacement while the source lasts, then cycles through reshuffles
    (``training.episodes.draw_starts``). Pass
    ``vera_env.tasks.builtin.builtin_source(seeds=range(n))`` for ``n`` fresh builtin
    instances of every type.
    """
    from datasets import Dataset  # noqa: PLC0415

    starts = draw_starts(list(tasks.ids()), num_prompts, seed=seed)
    return Dataset.from_dict({"prompt": [format_start(s) for s in starts],
                              "task_id": [s.task_id for s in starts],
                              "seed": [s.seed for s in starts]})


def task_source(spec: str, difficulties: Sequence[str], num_prompts: int) -> TaskSource:
    """``builtin`` as a fresh-seed curriculum; anything else through ``load_tasks``."""
    if spec != "builtin":
        return load_tasks(spec)
    from vera_env.tasks.builtin import builtin_source  # noqa: PLC0415

    return builtin_source(difficulties=tuple(difficulties), seeds=range(num_prompts))  # type: ignore[arg-type]


# ----- reward functions: the env's measurement, never the text -----

def verification_reward(completions: list, verification: list[float],
                        unscorable: list[bool], **_: Any) -> list[float | None]:
    """Harness-executed verification reward of each episode (None if unscorable)."""
    return [None if bad else value for value, bad in zip(verification, unscorable, strict=True)]


def correctness_reward(completions: list, correctness: list[float | None],
                       unscorable: list[bool], correct: list[bool | None],
                       out_of_tokens: list[bool], log_metric: Callable | None = None,
                       **_: Any) -> list[float | None]:
    """Correctness reward (0 when no answer was released; None if unscorable)."""
    scorable = [i for i, bad in enumerate(unscorable) if not bad]
    if log_metric is not None and scorable:
        log_metric("env/correct", float(np.mean([correct[i] is True for i in scorable])))
        log_metric("env/out_of_tokens", float(np.mean([out_of_tokens[i] for i in scorable])))
        log_metric("env/unscorable", 1.0 - len(scorable) / len(unscorable))
    return [None if bad else (value or 0.0)
            for value, bad in zip(correctness, unscorable, strict=True)]


def format_reward(completions: list, format_penalty: list[float], unscorable: list[bool],
                  **_: Any) -> list[float | None]:
    """Minus the format penalties of rejected turns (None if unscorable)."""
    return [None if bad else -value for value, bad in zip(format_penalty, unscorable, strict=True)]


REWARD_FUNCS = [verification_reward, correctness_reward, format_reward]
"""Their sum is the env's episode reward; weigh them with ``GRPOConfig.reward_weights``."""


# ----- the rollout function -----

def make_env(tasks: TaskSource, *, max_steps: int, wrappers: Sequence[str] = ("forced",),
             sandbox: str = "auto", reward: RewardConfig | None = None) -> Any:
    """A ``VeraEnv`` with the named wrappers (see ``vera_env.wrappers.apply_wrappers``)."""
    return apply_wrappers(VeraEnv(tasks, max_steps=max_steps, sandbox=sandbox, reward=reward),
                          wrappers)


class VeraRollout:
    """``rollout_func`` for ``trl.GRPOTrainer``: one VeraEnv episode per prompt element.

    Args:
        tasks: The task source the dataset's task ids come from.
        max_steps: Env step budget per episode.
        wrappers: Env wrappers, innermost first.
        sandbox: Sandbox backend.
        max_turn_tokens: Tokens one model turn may sample.
        env_workers: Threads stepping envs.
        reward: The env's reward configuration.
        sampler: Builds the sampler from the trainer (default: vLLM when the trainer
            uses it, else ``model.generate``). A seam for other backends.

    The envs (one per element of the largest batch seen) are kept between calls;
    ``close()`` releases them. ``last_episodes`` holds the latest batch, for inspection;
    ``timings`` the seconds spent sampling (``sample_s``) and stepping envs (``env_s``).
    """

    def __init__(self, tasks: TaskSource, *, max_steps: int = 6,
                 wrappers: Sequence[str] = ("forced",), sandbox: str = "auto",
                 max_turn_tokens: int = 512, env_workers: int = 8,
                 reward: RewardConfig | None = None,
                 sampler: Callable[[Any], Sampler] | None = None) -> None:
        if max_turn_tokens < 1 or env_workers < 1:
            raise ValueError(f"max_turn_tokens and env_workers must be >= 1, got "
                             f"{max_turn_tokens} and {env_workers}")
        self.tasks = tasks
        self._make_env = lambda: make_env(tasks, max_steps=max_steps, wrappers=wrappers,
                                          sandbox=sandbox, reward=reward)
        self.max_turn_tokens = max_turn_tokens
        self._sampler_factory = sampler
        self._envs: list[Any] = [self._make_env()]  # a bad env setting fails here, not mid-run
        self._pool = ThreadPoolExecutor(max_workers=env_workers)
        self._format: tuple[Any, ChatFormat] | None = None
        self.last_episodes: list[TokenEpisode] = []
        self.timings: dict[str, float] = {}

    def __call__(self, prompts: list, trainer: Any) -> dict[str, list]:
        starts = [parse_start(p) for p in prompts]
        while len(self._envs) < len(starts):
            self._envs.append(self._make_env())
        if self._format is None or self._format[0] is not trainer:
            self._format = (trainer, ChatFormat(trainer.processing_class, trainer.eos_token_ids))
        fmt = self._format[1]
        if self._sampler_factory is None:
            from training.samplers import trainer_sampler  # noqa: PLC0415 - needs torch

            sample = trainer_sampler(trainer)
        else:
            sample = self._sampler_factory(trainer)
        distributed = trainer.accelerator.num_processes > 1
        episodes = play_episodes(
            self._envs[: len(starts)], starts, sample, fmt,
            max_completion_length=trainer.max_completion_length,
            max_turn_tokens=self.max_turn_tokens, pool=self._pool,
            any_active=_any_active(trainer) if distributed else (lambda local: local),
            fixed_width=distributed, timings=self.timings)
        self.last_episodes = episodes
        return rollout_fields(episodes)

    def close(self) -> None:
        """Close every env and stop the step threads."""
        for env in self._envs:
            env.close()
        self._envs.clear()
        self._pool.shutdown(wait=True)


def _any_active(trainer: Any) -> Callable[[bool], bool]:
    import torch  # noqa: PLC0415

    def any_active(local: bool) -> bool:
        flag = torch.tensor([int(local)], device=trainer.accelerator.device)
        return bool(trainer.accelerator.gather(flag).sum().item() > 0)

    return any_active


def rollout_fields(episodes: Sequence[TokenEpisode]) -> dict[str, list]:
    """What ``rollout_func`` returns: ids, masks, logprobs and the env's measurements."""
    logprobs = [e.logprobs for e in episodes]
    return {
        "prompt_ids": [e.prompt_ids for e in episodes],
        "completion_ids": [e.completion_ids for e in episodes],
        "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
        "env_mask": [e.env_mask for e in episodes],
        "task_id": [e.start.task_id for e in episodes],
        "verification": [e.verification for e in episodes],
        "correctness": [e.correctness for e in episodes],
        "format_penalty": [e.penalty for e in episodes],
        "env_reward": [e.env_reward for e in episodes],
        "unscorable": [e.unscorable for e in episodes],
        "correct": [e.correct for e in episodes],
        "out_of_tokens": [e.out_of_tokens for e in episodes],
        "n_turns": [len(e.actions) for e in episodes],
    }


# ----- the script -----

def load_model(args: Args) -> tuple[Any, Any]:
    """The model and tokenizer named by ``args`` (a tiny local pair with ``--tiny``)."""
    if args.tiny:
        if args.beta:
            # TRL rebuilds the reference model from the model's folder; this one has none.
            raise SystemExit("--beta > 0 needs a saved model: save one with "
                             "training.tiny.build_tiny(FOLDER) and pass --model FOLDER")
        from training.tiny import tiny_model, tiny_tokenizer  # noqa: PLC0415

        tokenizer = tiny_tokenizer()
        return tiny_model(tokenizer, seed=args.seed), tokenizer
    if not args.model:
        raise SystemExit("give --model PATH (a chat model) or --tiny")
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    return AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype), tokenizer


def grpo_config(args: Args) -> Any:
    """The ``GRPOConfig`` for ``args``."""
    import torch  # noqa: PLC0415
    from trl import GRPOConfig  # noqa: PLC0415

    vllm = {}
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
        max_steps=args.train_steps, learning_rate=args.learning_rate, beta=args.beta,
        max_completion_length=args.max_completion_length, temperature=args.temperature,
        bf16=args.bf16, use_cpu=not torch.cuda.is_available(),
        activation_checkpointing=args.activation_checkpointing, logging_steps=args.logging_steps,
        report_to=args.report_to, save_strategy="no", seed=args.seed, **vllm)


def main(args: Args) -> Any:
    """Train; returns the trainer (its ``state.log_history`` holds the metrics)."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOTrainer  # noqa: PLC0415

    tasks = task_source(args.tasks, args.difficulties, args.num_prompts)
    dataset = build_dataset(tasks, args.num_prompts, seed=args.seed)
    model, tokenizer = load_model(args)
    rollout = VeraRollout(tasks, max_steps=args.env_max_steps, wrappers=args.wrappers,
                          sandbox=args.sandbox, max_turn_tokens=args.max_turn_tokens,
                          env_workers=args.env_workers)
    trainer = GRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=grpo_config(args),
                          train_dataset=dataset, processing_class=tokenizer,
                          rollout_func=rollout)
    try:
        trainer.train()
    finally:
        rollout.close()
    if args.save_final:
        trainer.save_model(args.output_dir)
        tokenizer.save_pretrained(args.output_dir)
    return trainer


if __name__ == "__main__":
    from training.arguments import parse_args

    main(parse_args(Args))
