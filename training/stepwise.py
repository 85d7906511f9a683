"""Step-wise episodes: every model turn is one sample, its prompt exactly the evaluation's.

Why. The environment's claim is a bounded observation — the rendered analysis graph
and a window of recent commands — never the growing transcript (the seed measured
9,267 tokens per step of transcript replay to deliver ~400 new ones). Evaluation
honours it: ``OpenAIChatPolicy`` and ``TransformersPolicy`` show one observation per
turn. The first GRPO layout did not: it concatenated every observation into one
sequence, so each turn added 1–3k tokens, ``--max-completion-length 8192`` ended
episodes after 4–6 turns, and the model was trained on contexts it never sees at
evaluation. Here each turn's prompt is built by ``policies.chat.prompt_ids``
— the function ``TransformersPolicy`` generates from — from that turn's observation
and prefill, so a sample's context is bounded by the observation budget whatever the
turn index, and a 30-step episode trains like a 3-step one. Peers do the same: SkyRL's
step-wise trajectories and rLLM's step-wise advantage broadcast train each turn as its
own sample.

The loop keeps the concatenated layout's lockstep (``training.episodes``): every live
episode's next turn is sampled in one call, then every env steps in a thread pool.
Completion ids are kept exactly as sampled (the prompt is tokenized from text, as the
evaluation policy tokenizes it; the sampled ids are never re-tokenized).

Each episode is recorded with the shared ``vera_env.rollout.attempt.Attempt``
lifecycle, so a sandbox or env fault in one episode becomes that episode's status —
excluded from training (no gradient, no share of its group's baseline) — instead of a
crash of the batch. No torch here: a sampler is any callable (``episodes.Sampler``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from policies.chat import prompt_ids
from training.episodes import Sampler, Start
from vera_env import info as keys
from vera_env.evaluation import EXCLUDED_STATUSES
from vera_env.rollout.attempt import Attempt

__all__ = ["StepEpisode", "StepwiseRollout", "TurnSample", "play_stepwise"]


@dataclass
class TurnSample:
    """One model turn: what the policy saw and what it sampled, with the env's verdict."""

    turn: int
    observation: str
    prefill: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float] | None
    action: str
    cut: bool = False  # ``max_turn_tokens`` ended the turn before an end-of-turn token
    reward: float = 0.0
    reward_parts: dict[str, Any] = field(default_factory=dict)
    error: str = ""  # why the env rejected the turn ("" if it was well-formed)


@dataclass
class StepEpisode:
    """One episode as a list of turn samples, with its ``Attempt`` record."""

    start: Start
    attempt: Attempt
    turns: list[TurnSample] = field(default_factory=list)
    observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    done: bool = False

    @property
    def excluded(self) -> bool:
        """No gradient: unscorable, or ended by an infrastructure or env fault."""
        return self.attempt.unscorable or self.attempt.status in EXCLUDED_STATUSES

    def fields(self) -> dict[str, Any]:
        """The episode's measurements, as the reward functions read them."""
        parts = [t.reward_parts for t in self.turns]
        correctness = [p["correctness"] for p in parts if p.get("correctness") is not None]
        return {"task_id": self.start.task_id,
                "verification": float(sum(p.get("verification", 0.0) for p in parts)),
                "correctness": correctness[-1] if correctness else None,
                "format_penalty": float(sum(p.get("penalty", 0.0) for p in parts)),
                "unscorable": self.excluded, "correct": self.attempt.correct,
                "answer": self.attempt.answer,
                "out_of_tokens": False, "n_turns": len(self.turns)}


def _reset(env: Any, start: Start) -> StepEpisode:
    episode = StepEpisode(start=start, attempt=Attempt.start(start.task_id, seed=start.seed))
    episode.done = True  # until the reset succeeded
    with episode.attempt.capturing():
        episode.observation, episode.info = env.reset(seed=start.seed,
                                                      options={"task_id": start.task_id})
        episode.attempt.begin(episode.info)
        episode.done = False
    return episode


def _step(env: Any, episode: StepEpisode, turn: TurnSample) -> None:
    """Step the env with the turn; a fault ends the episode as its status."""
    episode.done = True  # until the step succeeded
    with episode.attempt.capturing():
        obs, reward, terminated, truncated, info = env.step(turn.action)
        ended = episode.attempt.add_step(turn.action, obs, reward, terminated, truncated, info)
        turn.reward, turn.reward_parts = float(reward), dict(info[keys.REWARD_PARTS])
        turn.error = str(info.get(keys.ERROR) or "")
        episode.turns.append(turn)
        episode.observation, episode.info, episode.done = obs, info, ended


def _cut(ids: Sequence[int], logprobs: Sequence[float] | None, eos_ids: Sequence[int],
         limit: int) -> tuple[list[int], list[float] | None, bool]:
    """Keep the ids through the first end-of-turn token, at most ``limit``."""
    end = next((i + 1 for i, tok in enumerate(ids) if tok in eos_ids), len(ids))
    end = min(end, limit)
    kept = list(ids[:end])
    cut = not kept or kept[-1] not in eos_ids
    return kept, None if logprobs is None else list(logprobs[:end]), cut


def play_stepwise(envs: Sequence[Any], starts: Sequence[Start], sample: Sampler,
                  tokenizer: Any, eos_ids: Sequence[int], *, max_turn_tokens: int,
                  pool: ThreadPoolExecutor, system_prompt: str = "",
                  any_active: Callable[[bool], bool] = lambda local: local,
                  fixed_width: bool = False,
                  timings: dict[str, float] | None = None) -> list[StepEpisode]:
    """Play one episode per start in lockstep; every turn becomes a ``TurnSample``.

    Args:
        envs: One (wrapped) ``VeraEnv`` per start.
        starts: Task id and seed of each episode.
        sample: The model (see ``training.episodes.Sampler``).
        tokenizer: The model's tokenizer (prompts go through ``policies.chat``).
        eos_ids: Token ids that end a model turn.
        max_turn_tokens: Tokens one turn may sample.
        pool: Threads that step the envs.
        system_prompt: System message of every prompt (as the evaluation policy's).
        any_active: Whether any process still has a live episode (distributed: every
            process must sample the same number of times).
        fixed_width: Sample for every episode each round, finished ones with a one-token
            dummy context (backends that gather prompts across processes need it).
        timings: When given, ``sample_s``, ``env_s`` and ``rounds`` are added to it.

    Returns:
        The finished episodes (``Attempt.finish`` called), in the order of ``starts``.

    Raises:
        ValueError: Not one env per start, or ``max_turn_tokens`` < 1.
    """
    if len(envs) != len(starts):
        raise ValueError(f"need one env per start, got {len(envs)} envs for {len(starts)}")
    if max_turn_tokens < 1 or not eos_ids:
        raise ValueError("max_turn_tokens must be >= 1 and eos_ids non-empty")
    episodes = list(pool.map(_reset, envs, starts))
    while any_active(any(not e.done for e in episodes)):
        live = [i for i, e in enumerate(episodes) if not e.done]
        turns: dict[int, TurnSample] = {}
        for i in live:
            episode = episodes[i]
            prefill = str(episode.info.get(keys.PREFILL) or "")
            turns[i] = TurnSample(
                turn=len(episode.turns), observation=episode.observation, prefill=prefill,
                prompt_ids=prompt_ids(tokenizer, episode.observation, prefill=prefill,
                                      system_prompt=system_prompt),
                completion_ids=[], logprobs=None, action="")
        asked = list(range(len(episodes))) if fixed_width else live
        contexts = [turns[i].prompt_ids if i in turns else list(eos_ids[:1]) for i in asked]
        began = time.perf_counter()
        outputs = dict(zip(asked, sample(contexts, max_turn_tokens) if contexts else [],
                           strict=True))
        sampled = time.perf_counter()
        for i in live:
            turn = turns[i]
            turn.completion_ids, turn.logprobs, turn.cut = _cut(*outputs[i], eos_ids,
                                                                max_turn_tokens)
            turn.action = turn.prefill + tokenizer.decode(
                [t for t in turn.completion_ids if t not in eos_ids], skip_special_tokens=True)
        list(pool.map(lambda i, turns=turns: _step(envs[i], episodes[i], turns[i]), live))
        if timings is not None:
            timings["sample_s"] = timings.get("sample_s", 0.0) + sampled - began
            timings["env_s"] = timings.get("env_s", 0.0) + time.perf_counter() - sampled
            timings["rounds"] = timings.get("rounds", 0.0) + 1
    for episode in episodes:
        episode.attempt.finish()
    return episodes


class StepwiseRollout:
    """Plays a generation batch step-wise for ``StepwiseGRPOTrainer`` (its ``step_rollout``).

    Args:
        tasks: The task source the dataset's task ids come from.
        spec: The environment (``training.envs.env_spec``).
        max_turn_tokens: Tokens one model turn may sample.
        env_workers: Threads stepping envs.
        system_prompt: System message of every prompt (use the evaluation's).
        sampler: Builds the sampler from the trainer (default: vLLM when the trainer
            uses it, else ``model.generate``). A seam for other backends.

    The envs (one per episode of the largest batch seen) are kept between calls;
    ``close()`` releases them. ``timings`` holds the seconds spent sampling and stepping.
    """

    def __init__(self, tasks: Any, spec: Any, *, max_turn_tokens: int = 256,
                 env_workers: int = 8, system_prompt: str = "",
                 sampler: Callable[[Any], Sampler] | None = None) -> None:
        from training.envs import LockstepEnvs  # noqa: PLC0415

        if max_turn_tokens < 1 or env_workers < 1:
            raise ValueError(f"max_turn_tokens and env_workers must be >= 1, got "
                             f"{max_turn_tokens} and {env_workers}")
        self.max_turn_tokens, self.system_prompt = max_turn_tokens, system_prompt
        self._sampler_factory = sampler
        self._envs = LockstepEnvs(spec, tasks)  # a bad env setting fails here, not mid-run
        self._pool = ThreadPoolExecutor(max_workers=env_workers)
        self.timings: dict[str, float] = {}

    def __call__(self, prompts: list[Any], trainer: Any) -> list[StepEpisode]:
        from training.concatenated import any_active  # noqa: PLC0415 - needs torch
        from training.episodes import parse_start  # noqa: PLC0415

        starts = [parse_start(p) for p in prompts]
        if self._sampler_factory is None:
            from training.samplers import trainer_sampler  # noqa: PLC0415 - needs torch

            sample: Sampler = trainer_sampler(trainer)
        else:
            sample = self._sampler_factory(trainer)
        distributed = trainer.accelerator.num_processes > 1
        return play_stepwise(
            self._envs.take(len(starts)), starts, sample, trainer.processing_class,
            trainer.eos_token_ids, max_turn_tokens=self.max_turn_tokens, pool=self._pool,
            system_prompt=self.system_prompt,
            any_active=any_active(trainer) if distributed else (lambda local: local),
            fixed_width=distributed, timings=self.timings)

    def close(self) -> None:
        """Close every env and stop the step threads."""
        self._envs.close()
        self._pool.shutdown(wait=True)
