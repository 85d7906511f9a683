"""The one lockstep rollout loop of GRPO: episodes played turn by turn, one ``Attempt`` each.

Why lockstep. Every live episode of a batch samples its next turn in one call (one
batched ``generate`` or one vLLM request), then every env steps in a thread pool (the
sandbox runs subprocesses, which release the GIL). Turn-at-a-time per episode would
run the model at batch size 1.

Why the evaluation's prompt by default. The environment's claim is a bounded
observation — the rendered analysis graph and a window of recent commands — never the
growing transcript (the seed measured 9,267 tokens per step of transcript replay to
deliver ~400 new ones). Evaluation honours it: ``OpenAIChatPolicy`` and
``TransformersPolicy`` show one observation per turn. So by default each turn's
context is ``vera_env.policies.chat.prompt_ids`` of that turn's observation and prefill, a
sample's context is bounded by the observation budget whatever the turn index, and a
30-step episode trains like a 3-step one (SkyRL's step-wise trajectories and rLLM's
step-wise advantage broadcast do the same). The concatenated layout is the same loop
with another packing (``vera_env.training.packing``): what a turn is conditioned on and how an
episode becomes samples is the packing's; playing, recording and faults are this
module's, once.

Each episode is recorded with the shared ``vera_env.rollout.attempt.Attempt``
lifecycle, so a sandbox or env fault in one episode becomes that episode's status —
excluded from training (no gradient, no share of its group's baseline), never a reward
of 0 and never a crash of the batch. No torch here: a sampler is any callable
(``Sampler``).

Both layouts play here, so the names say lockstep, not step-wise: this module was
``stepwise`` while it served the step-wise layout alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from vera_env import info as keys
from vera_env.evaluation import EXCLUDED_STATUSES
from vera_env.rollout.attempt import Attempt
from vera_env.training.packing import LayoutName, Packing, TurnSample, make_packing
from vera_env.training.starts import DRAWN, Start, format_start, parse_start

if TYPE_CHECKING:
    import gymnasium as gym
    import numpy as np

    from vera_env.spec import EnvSpec
    from vera_env.tasks import TaskSource
    from vera_env.training.phase_log import PhaseLog

__all__ = ["DrawsTasks", "LockstepRollout", "PlayedEpisode", "Sampler", "TurnSample",
           "any_active", "play_lockstep"]

ROUND_LINE_S = 10.0
"""Least seconds between two "rollout round" lines: a CPU rollout is minutes of rounds,
a vLLM one hundreds of short ones."""


class Sampler(Protocol):
    """Samples one model turn for each context (token ids), at most ``max_new_tokens``.

    Returns one ``(ids, logprobs)`` per context, in order; ``logprobs`` (one per id) may
    be None when the backend does not report them. Ids after the first end-of-turn token
    are ignored.
    """

    def __call__(self, contexts: list[list[int]], max_new_tokens: int
                 ) -> list[tuple[list[int], list[float] | None]]: ...


@runtime_checkable
class DrawsTasks(Protocol):
    """A task source that draws tasks as they are played (``vera_env.tasks.Curriculum``):
    what a deferred start (``drawn:K``) needs."""

    def sample(self, n: int) -> Sequence[str]:
        """``n`` task ids, drawn now."""
        ...


@dataclass
class PlayedEpisode:
    """One episode as a list of turn samples, with its ``Attempt`` record."""

    start: Start
    attempt: Attempt
    turns: list[TurnSample] = field(default_factory=list)
    observation: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    out_of_tokens: bool = False  # the packing had no room for another turn

    @property
    def excluded(self) -> bool:
        """No gradient: unscorable, or ended by an infrastructure or env fault."""
        return self.attempt.unscorable or self.attempt.status in EXCLUDED_STATUSES

    def fields(self) -> dict[str, Any]:
        """The episode's measurements, as the reward functions read them."""
        parts = [t.reward_parts for t in self.turns]
        correctness = [p.correctness for p in parts if p.correctness is not None]
        return {"task_id": self.start.task_id,
                "verification": float(sum(p.verification for p in parts)),
                "correctness": correctness[-1] if correctness else None,
                "format_penalty": float(sum(p.penalty for p in parts)),
                "unscorable": self.excluded, "correct": self.attempt.correct,
                "answer": self.attempt.answer,
                "out_of_tokens": self.out_of_tokens, "n_turns": len(self.turns),
                # Why an excluded episode has no reward: TRL prints these kwargs when
                # every reward function returns None.
                "status": self.attempt.status, "error": self.attempt.error}


def _reset(env: gym.Env[str, str], start: Start) -> PlayedEpisode:
    episode = PlayedEpisode(start=start, attempt=Attempt.start(start.task_id, seed=start.seed))
    episode.done = True  # until the reset succeeded
    with episode.attempt.capturing():
        episode.observation, episode.info = env.reset(seed=start.seed,
                                                      options={"task_id": start.task_id})
        episode.attempt.begin(episode.info)
        episode.done = False
    return episode


def _step(env: gym.Env[str, str], episode: PlayedEpisode, turn: TurnSample) -> None:
    """Step the env with the turn; a fault ends the episode as its status."""
    episode.done = True  # until the step succeeded
    with episode.attempt.capturing():
        obs, reward, terminated, truncated, info = env.step(turn.action)
        ended = episode.attempt.add_step(turn.action, obs, reward, terminated, truncated, info)
        record = episode.attempt.steps[-1]
        turn.reward, turn.reward_parts, turn.error = record.reward, record.reward_parts, record.error
        episode.turns.append(turn)
        episode.observation, episode.info, episode.done = obs, info, ended


def _next_turn(episode: PlayedEpisode, packing: Packing) -> TurnSample | None:
    """The episode's next turn as the packing conditions it, or None (no room: it ends)."""
    prefill = str(episode.info.get(keys.PREFILL) or "")
    context = packing.context(episode.turns, episode.observation, prefill)
    if context is None:
        episode.done = episode.out_of_tokens = True
        return None
    ids, room = context
    return TurnSample(turn=len(episode.turns), observation=episode.observation,
                      prefill=prefill, prompt_ids=ids, room=room)


def _take(turn: TurnSample, ids: Sequence[int], logprobs: Sequence[float] | None,
          eos_ids: Sequence[int], tokenizer: Any) -> None:
    """Keep the ids through the first end-of-turn token, at most ``turn.room``; the
    action is the prefill and the decoded turn."""
    end = min(next((i + 1 for i, tok in enumerate(ids) if tok in eos_ids), len(ids)), turn.room)
    turn.completion_ids = list(ids[:end])
    turn.logprobs = None if logprobs is None else list(logprobs[:end])
    turn.cut = not turn.completion_ids or turn.completion_ids[-1] not in eos_ids
    turn.action = turn.prefill + tokenizer.decode(
        [t for t in turn.completion_ids if t not in eos_ids], skip_special_tokens=True)


def play_lockstep(envs: Sequence[gym.Env[str, str]], starts: Sequence[Start], sample: Sampler,
                  packing: Packing, tokenizer: Any, *, pool: ThreadPoolExecutor,
                  any_active: Callable[[bool], bool] = lambda local: local,
                  fixed_width: bool = False,
                  timings: dict[str, float] | None = None,
                  on_round: Callable[[int, int], None] | None = None) -> list[PlayedEpisode]:
    """Play one episode per start in lockstep; every turn becomes a ``TurnSample``.

    Args:
        envs: One (wrapped) ``VeraEnv`` per start.
        starts: Task id and seed of each episode.
        sample: The model (see ``Sampler``).
        packing: What each turn is conditioned on (``vera_env.training.packing``).
        tokenizer: The model's tokenizer (decodes the sampled turns into actions).
        pool: Threads that step the envs.
        any_active: Whether any process still has a live episode (distributed: every
            process must sample the same number of times).
        fixed_width: Sample for every episode each round, finished ones with a one-token
            dummy context (backends that gather prompts across processes need it).
        timings: When given, ``sample_s``, ``env_s`` and ``rounds`` are added to it.
        on_round: Called before each round's sampling with the round (from 1) and the
            episodes still playing: a CPU model's rollout is minutes of rounds.

    Returns:
        The finished episodes (``Attempt.finish`` called), in the order of ``starts``.

    Raises:
        ValueError: Not one env per start.
    """
    if len(envs) != len(starts):
        raise ValueError(f"need one env per start, got {len(envs)} envs for {len(starts)}")
    eos_ids = packing.eos_ids
    episodes = list(pool.map(_reset, envs, starts))
    rounds = 0
    while any_active(any(not e.done for e in episodes)):
        turns = {i: turn for i, e in enumerate(episodes) if not e.done
                 if (turn := _next_turn(e, packing)) is not None}
        rounds += 1
        if on_round is not None:
            on_round(rounds, len(turns))
        asked = list(range(len(episodes))) if fixed_width else list(turns)
        contexts = [turns[i].prompt_ids if i in turns else list(eos_ids[:1]) for i in asked]
        budget = max([t.room for t in turns.values()] or [1])
        began = time.perf_counter()
        outputs = dict(zip(asked, sample(contexts, budget) if contexts else [], strict=True))
        sampled = time.perf_counter()
        for i, turn in turns.items():
            _take(turn, *outputs[i], eos_ids, tokenizer)
        list(pool.map(lambda i, turns=turns: _step(envs[i], episodes[i], turns[i]), turns))
        if timings is not None:
            timings["sample_s"] = timings.get("sample_s", 0.0) + sampled - began
            timings["env_s"] = timings.get("env_s", 0.0) + time.perf_counter() - sampled
            timings["rounds"] = timings.get("rounds", 0.0) + 1
    for episode in episodes:
        episode.attempt.finish()
    return episodes


def any_active(trainer: Any) -> Callable[[bool], bool]:
    """Whether any process still has a live episode (every process samples as often)."""
    import torch  # noqa: PLC0415 - this module is torch-free otherwise

    def check(local: bool) -> bool:
        flag = torch.tensor([int(local)], device=trainer.accelerator.device)
        return bool(trainer.accelerator.gather(flag).sum().item() > 0)

    return check


class LockstepRollout:
    """Plays a generation batch for ``MultiTurnGRPOTrainer`` (its ``rollout``).

    Args:
        tasks: The task source the dataset's task ids come from; deferred starts
            (``drawn:K``) need one that draws (``DrawsTasks``: a ``Curriculum``).
        spec: The environment (``vera_env.training.envs.EnvOptions.env_spec``).
        layout: The packing (``vera_env.training.packing``): ``stepwise`` or ``episode``.
        max_turn_tokens: Tokens one model turn may sample.
        max_completion_length: Episode layout: tokens after the first prompt.
        env_workers: Threads stepping envs.
        system_prompt: System message of every prompt (use the evaluation's).
        sampler: Builds the sampler from the trainer (default: vLLM when the trainer
            uses it, else ``model.generate``). A seam for other backends.
        log: Where the rollout says what it is doing (environments started, rounds
            played, at most one round line per ``ROUND_LINE_S``); None: silent.

    The envs (one per episode of the largest batch seen) are kept between calls;
    ``close()`` releases them. ``timings`` holds the seconds spent sampling and stepping
    and the episodes played.
    """

    def __init__(self, tasks: TaskSource, spec: EnvSpec, *, layout: LayoutName = "stepwise",
                 max_turn_tokens: int = 256, max_completion_length: int = 4096,
                 env_workers: int = 8, system_prompt: str = "",
                 sampler: Callable[[Any], Sampler] | None = None,
                 log: PhaseLog | None = None) -> None:
        from vera_env.training.envs import LockstepEnvs  # noqa: PLC0415

        if max_turn_tokens < 1 or env_workers < 1 or max_completion_length < 2:
            raise ValueError(f"max_turn_tokens and env_workers must be >= 1 and "
                             f"max_completion_length >= 2, got {max_turn_tokens}, "
                             f"{env_workers} and {max_completion_length}")
        self.layout, self.system_prompt = layout, system_prompt
        self.max_turn_tokens, self.max_completion_length = max_turn_tokens, max_completion_length
        self._sampler_factory = sampler
        self.log = log
        self._packing: tuple[Any, Packing] | None = None
        self._envs = LockstepEnvs(spec, tasks)  # a bad env setting fails here, not mid-run
        self._tasks = tasks
        self._pool = ThreadPoolExecutor(max_workers=env_workers)
        self.timings: dict[str, float] = {}

    def packing(self, trainer: Any) -> Packing:
        """The packing for ``trainer``'s tokenizer (built once per trainer)."""
        if self._packing is None or self._packing[0] is not trainer:
            self._packing = (trainer, make_packing(
                self.layout, trainer.processing_class, trainer.eos_token_ids,
                max_turn_tokens=self.max_turn_tokens,
                max_completion_length=self.max_completion_length,
                system_prompt=self.system_prompt,
                max_context_tokens=_model_window(trainer)))
        return self._packing[1]

    def __call__(self, prompts: list[Any], trainer: Any) -> list[PlayedEpisode]:
        drawn: dict[str, str] = {}  # per call: a dataset epoch later, slot K draws anew
        starts = [self._resolve(parse_start(p), drawn) for p in prompts]
        if self._sampler_factory is None:
            from vera_env.training.samplers import trainer_sampler  # noqa: PLC0415 - needs torch

            sample: Sampler = trainer_sampler(trainer)
        else:
            sample = self._sampler_factory(trainer)
        distributed = trainer.accelerator.num_processes > 1
        self.timings["episodes"] = self.timings.get("episodes", 0.0) + len(starts)
        if self.log is not None and len(starts) > self._envs.held:
            self.log(f"starting {len(starts) - self._envs.held} more environments "
                     f"({len(starts)} in all, one per episode)")
        envs = self._envs.take(len(starts))
        return play_lockstep(
            envs, starts, sample, self.packing(trainer),
            trainer.processing_class, pool=self._pool,
            any_active=any_active(trainer) if distributed else (lambda local: local),
            fixed_width=distributed, timings=self.timings, on_round=self._round_line(len(starts)))

    def _round_line(self, total: int) -> Callable[[int, int], None] | None:
        """``play_lockstep``'s ``on_round``: a line per quiet spell, or None when silent."""
        log = self.log
        if log is None:
            return None

        def line(round_: int, live: int) -> None:
            log.every(ROUND_LINE_S, f"rollout round {round_}: {live} of {total} episodes "
                                    "sampling a turn")

        return line

    def redraw(self, prompt: Any, rng: np.random.Generator) -> str:
        """Another start for a group that taught nothing (``MultiTurnGRPOTrainer``'s
        ``redraws``): a deferred one is returned as it is, since it is drawn anew when
        played, from a curriculum that has just seen the group's outcomes; a fixed one
        becomes a task drawn uniformly from the source, with the same reset seed."""
        start = parse_start(prompt)
        if start.task_id.startswith(DRAWN):
            return format_start(start)
        ids = self._tasks.ids()
        return format_start(Start(task_id=ids[int(rng.integers(len(ids)))], seed=start.seed))

    def _resolve(self, start: Start, drawn: dict[str, str]) -> Start:
        """A deferred start (``drawn:K``) with its task drawn now from the source, once per
        generation batch (``drawn``): TRL puts a prompt's copies, one per group member,
        in the same generation batch, and the whole group must play the same task.

        With several processes each draws from its own curriculum, and a group split
        across processes would play different tasks: use one process per group.

        Raises:
            ValueError: A deferred start from a source that does not draw.
        """
        if not start.task_id.startswith(DRAWN):
            return start
        if not isinstance(self._tasks, DrawsTasks):
            raise ValueError(f"a deferred start ({start.task_id}) needs a task source that "
                             f"draws tasks (a Curriculum), got {type(self._tasks).__name__}")
        if start.task_id not in drawn:
            drawn[start.task_id] = self._tasks.sample(1)[0]
        return Start(task_id=drawn[start.task_id], seed=start.seed)

    def close(self) -> None:
        """Close every env and stop the step threads."""
        self._envs.close()
        self._pool.shutdown(wait=True)


def _model_window(trainer: Any) -> int | None:
    """The trainer's model's ``max_position_embeddings`` (None when it has none)."""
    config = getattr(getattr(trainer, "model", None), "config", None)
    window = getattr(config, "max_position_embeddings", None)
    return window if isinstance(window, int) and window > 0 else None
