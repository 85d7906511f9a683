"""The concatenated layout: a whole episode as one TRL sample (``--layout episode``).

Kept as an option beside the step-wise default (``training.stepwise``). Here
``GRPOTrainer(rollout_func=VeraRollout(...))`` gets the prompts of a generation batch,
each repeated ``num_generations`` times, and each element becomes one whole episode in
its own env, sampled turn by turn and returned as token ids with ``env_mask`` (1 on
sampled tokens, 0 on observations; see ``training.episodes``). Every observation is
appended to one growing sequence, so the context grows by an observation (1–3k
tokens) per turn and the model trains on contexts an evaluation policy never shows it
— which is why it is not the default.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from training.envs import LockstepEnvs, env_spec
from training.episodes import ChatFormat, Sampler, TokenEpisode, parse_start, play_episodes
from vera_env.spec import EnvSpec, SandboxName
from vera_env.tasks import TaskSource
from vera_env.verification.rewards import RewardConfig
from vera_env.wrappers import WrapperName

__all__ = ["VeraRollout", "any_active", "rollout_fields"]


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
        spec: The whole environment as an ``EnvSpec`` (overrides the four above).
        sampler: Builds the sampler from the trainer (default: vLLM when the trainer
            uses it, else ``model.generate``). A seam for other backends.

    The envs (one per element of the largest batch seen) are kept between calls;
    ``close()`` releases them. ``last_episodes`` holds the latest batch, for inspection;
    ``timings`` the seconds spent sampling (``sample_s``) and stepping envs (``env_s``).
    """

    def __init__(self, tasks: TaskSource, *, max_steps: int = 6,
                 wrappers: Sequence[WrapperName] = ("forced",), sandbox: SandboxName = "auto",
                 max_turn_tokens: int = 512, env_workers: int = 8,
                 reward: RewardConfig | None = None, spec: EnvSpec | None = None,
                 sampler: Callable[[Any], Sampler] | None = None) -> None:
        if max_turn_tokens < 1 or env_workers < 1:
            raise ValueError(f"max_turn_tokens and env_workers must be >= 1, got "
                             f"{max_turn_tokens} and {env_workers}")
        self.tasks = tasks
        spec = spec or env_spec(max_steps=max_steps, wrappers=wrappers, sandbox=sandbox,
                                reward=reward)
        self.max_turn_tokens = max_turn_tokens
        self._sampler_factory = sampler
        self._envs = LockstepEnvs(spec, tasks)  # a bad env setting fails here, not mid-run
        self._pool = ThreadPoolExecutor(max_workers=env_workers)
        self._format: tuple[Any, ChatFormat] | None = None
        self.last_episodes: list[TokenEpisode] = []
        self.timings: dict[str, float] = {}

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        starts = [parse_start(p) for p in prompts]
        if self._format is None or self._format[0] is not trainer:
            self._format = (trainer, ChatFormat(trainer.processing_class, trainer.eos_token_ids))
        fmt = self._format[1]
        if self._sampler_factory is None:
            from training.samplers import trainer_sampler  # noqa: PLC0415 - needs torch

            sample: Sampler = trainer_sampler(trainer)
        else:
            sample = self._sampler_factory(trainer)
        distributed = trainer.accelerator.num_processes > 1
        episodes = play_episodes(
            self._envs.take(len(starts)), starts, sample, fmt,
            max_completion_length=trainer.max_completion_length,
            max_turn_tokens=self.max_turn_tokens, pool=self._pool,
            any_active=any_active(trainer) if distributed else (lambda local: local),
            fixed_width=distributed, timings=self.timings)
        self.last_episodes = episodes
        return rollout_fields(episodes)

    def close(self) -> None:
        """Close every env and stop the step threads."""
        self._envs.close()
        self._pool.shutdown(wait=True)


def any_active(trainer: Any) -> Callable[[bool], bool]:
    """Whether any process still has a live episode (every process samples as often)."""
    import torch  # noqa: PLC0415

    def check(local: bool) -> bool:
        flag = torch.tensor([int(local)], device=trainer.accelerator.device)
        return bool(trainer.accelerator.gather(flag).sum().item() > 0)

    return check


def rollout_fields(episodes: Sequence[TokenEpisode]) -> dict[str, Any]:
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
        "answer": [e.answer for e in episodes],
        "out_of_tokens": [e.out_of_tokens for e in episodes],
        "n_turns": [len(e.actions) for e in episodes],
    }
