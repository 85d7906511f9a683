"""How the turns of a lockstep episode become a model's contexts and TRL's samples.

There is one rollout loop (``vera_env.training.lockstep.play_lockstep``): it samples every live
episode's next turn in one call, steps every env, records each episode with one
``Attempt``. What differs between the two GRPO layouts is only the *packing* — what
the model is conditioned on at a turn, and how an episode's turns become samples:

* ``TurnPacking`` (``--layout stepwise``, the default): a turn's context is
  ``vera_env.policies.chat.prompt_ids`` of its observation (system prompt, the observation,
  a forced answer's prefill) — byte for byte the evaluation policy's prompt — and
  every turn is one sample.
* ``EpisodePacking`` (``--layout episode``): a turn's context is the whole episode so
  far (the first prompt, then each turn as sampled and each later observation as the
  chat template's user block), and the episode is one sample whose ``mask`` is 1 on
  sampled tokens and 0 on what the env wrote. Its context grows by an observation per
  turn and is not what evaluation shows; it is kept to compare the two
  (``benchmarks/training_layouts.py``). An episode ends when its next observation
  would leave no room under ``max_completion_length`` (``out_of_tokens``).

Either way the completion ids are kept exactly as sampled, never re-tokenized: a
policy-gradient update must score the tokens the policy produced. No torch here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from vera_env.policies.chat import prompt_ids
from vera_env.records import RewardPartsRecord
from vera_env.training.transcripts import ChatFormat

__all__ = ["EpisodePacking", "LayoutName", "Packing", "Sample", "TurnPacking", "TurnSample",
           "make_packing"]

LayoutName = Literal["stepwise", "episode"]
"""The GRPO layouts: one sample per turn, or one concatenated sample per episode."""


@dataclass
class TurnSample:
    """One model turn: what the policy saw and what it sampled, with the env's verdict.

    ``prompt_ids`` is the whole context the turn was sampled from (the packing's).
    ``room`` is how many tokens the turn was allowed to sample.
    """

    turn: int
    observation: str
    prefill: str
    prompt_ids: list[int]
    room: int
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    action: str = ""
    cut: bool = False  # ``room`` ended the turn before an end-of-turn token
    reward: float = 0.0
    reward_parts: RewardPartsRecord = field(default_factory=RewardPartsRecord)
    error: str = ""  # why the env rejected the turn ("" if it was well-formed)


@dataclass(frozen=True, slots=True)
class Sample:
    """One row of a GRPO batch: ids, which completion tokens earn loss, sampled logprobs.

    ``mask`` is aligned with ``completion_ids`` (1: sampled by the model, trained; 0:
    written by the env). ``logprobs`` holds one value per completion id (0.0 on masked
    ones), or None when the sampler did not report them.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    mask: list[int]
    logprobs: list[float] | None
    advantage: float


class Packing(Protocol):
    """A layout: the context of a turn, and the samples of a finished episode."""

    @property
    def name(self) -> LayoutName:
        """The layout this packing implements."""
        ...

    @property
    def eos_ids(self) -> tuple[int, ...]:
        """Token ids that end a model turn (the first closes a cut turn)."""
        ...

    def context(self, turns: Sequence[TurnSample], observation: str,
                prefill: str) -> tuple[list[int], int] | None:
        """The ids the next turn is sampled from and how many tokens it may sample, or
        None when the episode has no room left (it ends, ``out_of_tokens``)."""
        ...

    def samples(self, turns: Sequence[TurnSample], advantages: Sequence[float]) -> list[Sample]:
        """The samples of an episode's turns (``advantages``: one per turn)."""
        ...


def _closed(turn: TurnSample, eos_ids: Sequence[int]) -> list[int]:
    """The turn's ids with an end-of-turn token when the budget cut it (never trained)."""
    return turn.completion_ids + (list(eos_ids[:1]) if turn.cut else [])


@dataclass(frozen=True)
class TurnPacking:
    """Step-wise: each turn's context is the evaluation prompt; each turn a sample."""

    tokenizer: Any
    eos_ids: tuple[int, ...]
    max_turn_tokens: int
    system_prompt: str = ""
    name: LayoutName = "stepwise"
    max_context_tokens: int | None = None  # the model's window: prompt + turn fit in it

    def context(self, turns: Sequence[TurnSample], observation: str,
                prefill: str) -> tuple[list[int], int] | None:
        del turns  # the observation is the whole state: no transcript
        limit = (None if self.max_context_tokens is None
                 else max(1, self.max_context_tokens - self.max_turn_tokens))
        return (prompt_ids(self.tokenizer, observation, prefill=prefill,
                           system_prompt=self.system_prompt, max_tokens=limit),
                self.max_turn_tokens)

    def samples(self, turns: Sequence[TurnSample], advantages: Sequence[float]) -> list[Sample]:
        return [Sample(t.prompt_ids, t.completion_ids, [1] * len(t.completion_ids),
                       t.logprobs, float(adv))
                for t, adv in zip(turns, advantages, strict=True)]


@dataclass(frozen=True)
class EpisodePacking:
    """Concatenated: each turn's context is the episode so far; each episode a sample.

    The first context is the step-wise one (so both layouts start alike); later ones
    append the previous turn as sampled (closed by an end-of-turn token if it was cut)
    and the observation as ``ChatFormat.observation`` renders it, then the prefill.
    """

    fmt: ChatFormat
    max_turn_tokens: int
    max_completion_length: int
    system_prompt: str = ""
    name: LayoutName = "episode"

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return self.fmt.eos_ids

    def context(self, turns: Sequence[TurnSample], observation: str,
                prefill: str) -> tuple[list[int], int] | None:
        if not turns:
            ids = prompt_ids(self.fmt.tokenizer, observation, prefill=prefill,
                             system_prompt=self.system_prompt)
            return ids, min(self.max_turn_tokens, self.max_completion_length - 1)
        last = turns[-1]
        ids = (last.prompt_ids + _closed(last, self.eos_ids) + self.fmt.observation(observation)
               + (self.fmt.encode(prefill) if prefill else []))
        room = self.max_completion_length - (len(ids) - len(turns[0].prompt_ids)) - 1
        # At least one sampled token and its end-of-turn must still fit.
        return (ids, min(self.max_turn_tokens, room)) if room >= 1 else None

    def samples(self, turns: Sequence[TurnSample], advantages: Sequence[float]) -> list[Sample]:
        if not turns:
            return []
        start = len(turns[0].prompt_ids)
        ids: list[int] = []
        mask: list[int] = []
        logprobs: list[float] | None = []
        for turn in turns:
            written = turn.prompt_ids[start + len(ids):]  # the env's: observation, prefill
            closing = _closed(turn, self.eos_ids)[len(turn.completion_ids):]
            ids += written + turn.completion_ids + closing
            mask += [0] * len(written) + [1] * len(turn.completion_ids) + [0] * len(closing)
            if logprobs is not None and turn.logprobs is not None:
                logprobs += [0.0] * len(written) + turn.logprobs + [0.0] * len(closing)
            else:
                logprobs = None
        return [Sample(turns[0].prompt_ids, ids, mask, logprobs, float(advantages[0]))]


def make_packing(layout: LayoutName, tokenizer: Any, eos_ids: Sequence[int], *,
                 max_turn_tokens: int, max_completion_length: int = 4096,
                 system_prompt: str = "", max_context_tokens: int | None = None) -> Packing:
    """The packing of ``layout`` for a model's tokenizer.

    ``max_context_tokens`` (the model's ``max_position_embeddings``): a step-wise turn's
    prompt is fitted to it less the turn's room, its observation clipped in the middle.

    Raises:
        ValueError: An unknown layout, a budget below 1 (2 for ``max_completion_length``),
            or no end-of-turn token.
    """
    if max_turn_tokens < 1 or max_completion_length < 2 or not eos_ids:
        raise ValueError(f"need max_turn_tokens >= 1, max_completion_length >= 2 and an "
                         f"end-of-turn token; got {max_turn_tokens}, {max_completion_length}, "
                         f"{list(eos_ids)}")
    if layout == "stepwise":
        return TurnPacking(tokenizer, tuple(eos_ids), max_turn_tokens, system_prompt,
                           max_context_tokens=max_context_tokens)
    if layout == "episode":
        return EpisodePacking(ChatFormat(tokenizer, eos_ids), max_turn_tokens,
                              max_completion_length, system_prompt)
    raise ValueError(f"layout must be stepwise or episode, got {layout!r}")
