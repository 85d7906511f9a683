"""Episodes as token sequences: the model's sampled ids kept as sampled, observations masked.

Why ids, never re-rendered text. A policy-gradient update must score exactly the tokens
the policy sampled. Rendering the transcript back into a chat and re-tokenizing it
changes them — a BPE merge across a turn boundary, a template that strips whitespace or
earlier ``<think>`` blocks — and the update then trains tokens the model never produced.
So an episode is built by concatenation only: the first observation through the chat
template (the prompt), then each model turn's sampled ids (``env_mask`` 1), then each
later observation as the token suffix the chat template puts after an assistant turn
(``env_mask`` 0: the env wrote it, no loss).

Why lockstep. Every live episode of a batch samples its next turn in one call (one
batched ``generate`` or one vLLM request), then every env steps in a thread pool (the
sandbox runs subprocesses, which release the GIL). Turn-at-a-time per episode would run
the model at batch size 1.

What ends an episode: the env (an answer, the step budget, a sandbox fault), or the
token budget ``max_completion_length`` — the next observation would not fit. Either way
the completion ends with an end-of-turn token — appended with ``env_mask`` 0 (no loss)
when the model's own turn was cut by ``max_turn_tokens`` — so TRL sees a finished turn.

This module needs no torch: a sampler is any callable mapping contexts to sampled ids.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from vera_env import info as keys
from vera_env.errors import SandboxError

__all__ = [
    "IGNORE", "ChatFormat", "Layout", "Sampler", "Start", "TokenEpisode", "draw_starts",
    "format_start", "parse_start", "play_episodes", "tokenize_transcript",
]

IGNORE = -100
"""Label of a token that earns no loss (observations, prompts)."""

Layout = Literal["episode", "turns"]
"""How a transcript becomes training sequences: the whole episode as one sequence (the
context GRPO trains in), or one sequence per turn, each from its observation alone (the
context ``OpenAIChatPolicy`` and ``TransformersPolicy`` give a model)."""


@dataclass(frozen=True, slots=True)
class Start:
    """Where an episode starts: the task and the reset seed."""

    task_id: str
    seed: int


def draw_starts(task_ids: Sequence[str], n: int, *, seed: int = 0) -> list[Start]:
    """``n`` starts: task ids without replacement while they last, then reshuffled again.

    Raises:
        ValueError: ``n`` < 1 or no task ids.
    """
    if n < 1:
        raise ValueError(f"need at least one start, got n={n}")
    if not task_ids:
        raise ValueError("no task ids to draw from")
    rng = np.random.default_rng(seed)
    order: list[str] = []
    while len(order) < n:
        order.extend(task_ids[i] for i in rng.permutation(len(task_ids)))
    return [Start(task_id=t, seed=int(rng.integers(2**31))) for t in order[:n]]


def format_start(start: Start) -> str:
    """The dataset ``prompt`` of an episode: its start, as JSON (rollout_func sees only it)."""
    return json.dumps({"task_id": start.task_id, "seed": start.seed})


def parse_start(prompt: Any) -> Start:
    """Read a ``format_start`` prompt back.

    Raises:
        ValueError: The prompt was not written by ``format_start`` (a dataset built by hand
            with ordinary prompts: use ``training.grpo.build_dataset``).
    """
    try:
        data = json.loads(prompt)
        return Start(task_id=str(data["task_id"]), seed=int(data["seed"]))
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"expected a prompt written by format_start, e.g. "
                         f"'{{\"task_id\": \"seq.gc_content.easy.s0\", \"seed\": 0}}'; "
                         f"got {str(prompt)[:80]!r}") from exc


class Sampler(Protocol):
    """Samples one model turn for each context (token ids), at most ``max_new_tokens``.

    Returns one ``(ids, logprobs)`` per context, in order; ``logprobs`` (one per id) may
    be None when the backend does not report them. Ids after the first end-of-turn token
    are ignored.
    """

    def __call__(self, contexts: list[list[int]], max_new_tokens: int
                 ) -> list[tuple[list[int], list[float] | None]]: ...


class ChatFormat:
    """Turns observations into token ids through a tokenizer's chat template.

    Args:
        tokenizer: A Hugging Face tokenizer with a chat template and an EOS token.
        eos_ids: Token ids that end a model turn (default: the tokenizer's EOS). The
            first one is appended when a turn is cut.

    Raises:
        ValueError: The tokenizer has no chat template or EOS, or its template does not
            close an assistant turn with EOS.
    """

    def __init__(self, tokenizer: Any, eos_ids: Sequence[int] = ()) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat_template; set one (see training.tiny)")
        eos = list(eos_ids) or [tokenizer.eos_token_id]
        if eos[0] is None:
            raise ValueError("the tokenizer has no eos_token; the end of a turn is undefined")
        if tokenizer.eos_token_id is not None and tokenizer.eos_token_id in eos:
            eos.remove(tokenizer.eos_token_id)
            eos.insert(0, tokenizer.eos_token_id)
        self.tokenizer = tokenizer
        self.eos_ids = tuple(eos)
        self._turn = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        # The suffix starts after the end-of-turn token that closes the dummy assistant
        # turn; counting those tokens (rather than comparing renderings) tolerates
        # templates that re-render earlier turns, e.g. Qwen3 dropping an empty <think>.
        self._turn_ends = sum(tok in self.eos_ids
                              for tok in self._render(self._turn, generation_prompt=False))
        if not self._turn_ends:
            raise ValueError("the chat template does not end an assistant turn with EOS")
        self.observation("probe")  # fail here, not mid-training

    def _render(self, messages: list[dict[str, str]], *, generation_prompt: bool) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt,
                                                 tokenize=True, return_dict=False)
        return list(ids)

    def first(self, observation: str) -> list[int]:
        """The prompt: the first observation as a user message, then the assistant header."""
        return self._render([{"role": "user", "content": observation}], generation_prompt=True)

    def observation(self, observation: str) -> list[int]:
        """What follows a finished model turn: the observation as a user message, then
        the assistant header — the chat template's own tokens, cut from a rendering of a
        dummy conversation after the end-of-turn token that closes its assistant turn.

        Raises:
            ValueError: The rendering has fewer end-of-turn tokens than the dummy turn.
        """
        full = self._render(self._turn + [{"role": "user", "content": observation}],
                            generation_prompt=True)
        ends = [i for i, tok in enumerate(full) if tok in self.eos_ids]
        if len(ends) < self._turn_ends:
            raise ValueError("the chat template renders fewer end-of-turn tokens once a user "
                             "message follows the assistant turn; cannot find the suffix")
        return full[ends[self._turn_ends - 1] + 1:]

    def encode(self, text: str) -> list[int]:
        """Plain text (an assistant prefill) as ids, no special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Ids as text, special tokens dropped (what the env receives)."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))


def tokenize_transcript(fmt: ChatFormat, observations: Sequence[str], actions: Sequence[str],
                        layout: Layout = "episode", *, prefills: Sequence[str] = (),
                        system_prompt: str = "") -> list[tuple[list[int], list[int]]]:
    """A played transcript as ``(input_ids, labels)`` sequences for supervised training.

    ``observations[i]`` is what the policy saw before ``actions[i]``. Labels are the ids
    on action tokens and each turn's closing end-of-turn token, ``IGNORE`` elsewhere.
    In the ``turns`` layout each sequence's context is exactly what an evaluation policy
    is conditioned on (``policies.chat.prompt_ids``: system prompt, observation, and the
    turn's prefill ``prefills[i]``, which the action then starts with and which is not
    labelled).

    Raises:
        ValueError: Not one observation per action, or an unknown layout.
    """
    if len(observations) != len(actions) or not actions:
        raise ValueError(f"need one observation per action, got {len(observations)} "
                         f"observations for {len(actions)} actions")
    if layout not in ("episode", "turns"):
        raise ValueError(f"layout must be 'episode' or 'turns', got {layout!r}")
    if layout == "turns":
        return [_turn_sequence(fmt, obs, action, prefill, system_prompt)
                for obs, action, prefill in zip(observations, actions,
                                                list(prefills) or [""] * len(actions), strict=False)]
    ids: list[int] = []
    labels: list[int] = []
    for i, (obs, action) in enumerate(zip(observations, actions, strict=False)):
        context = fmt.first(obs) if i == 0 else fmt.observation(obs)
        turn = fmt.encode(action) + list(fmt.eos_ids[:1])
        ids += context + turn
        labels += [IGNORE] * len(context) + turn
    return [(ids, labels)]


def _turn_sequence(fmt: ChatFormat, observation: str, action: str, prefill: str,
                   system_prompt: str) -> tuple[list[int], list[int]]:
    from policies.chat import prompt_ids  # noqa: PLC0415 - policies import vera_env only

    if prefill and not action.startswith(prefill):
        prefill = ""  # the policy did not continue the prefill: train the whole turn
    context = prompt_ids(fmt.tokenizer, observation, prefill=prefill,
                         system_prompt=system_prompt)
    turn = fmt.encode(action[len(prefill):]) + list(fmt.eos_ids[:1])
    return context + turn, [IGNORE] * len(context) + turn


@dataclass
class TokenEpisode:
    """One episode as TRL consumes it, with what the env measured.

    ``completion_ids``, ``env_mask`` and ``logprobs`` are aligned: ``env_mask`` is 1 on
    sampled model tokens and 0 on observation, prefill and appended end-of-turn tokens,
    whose logprob is recorded as 0.0.
    """

    start: Start
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    env_reward: float = 0.0
    verification: float = 0.0
    correctness: float | None = None
    penalty: float = 0.0
    unscorable: bool = False
    correct: bool | None = None
    answer: str = ""
    out_of_tokens: bool = False
    error: str = ""
    done: bool = False
    prefill: str = ""  # the assistant prefix the env asked for this turn (a forced answer)

    def add(self, ids: Sequence[int], *, sampled: bool, logprobs: Sequence[float] | None = None
            ) -> None:
        """Append ids: sampled by the model (trained) or written by the env (masked)."""
        self.completion_ids.extend(ids)
        self.env_mask.extend([int(sampled)] * len(ids))
        if self.logprobs is not None:
            if not sampled:
                self.logprobs.extend([0.0] * len(ids))
            elif logprobs is None:
                self.logprobs = None
            else:
                self.logprobs.extend(logprobs)

    @property
    def context(self) -> list[int]:
        """What the model conditions on for its next turn."""
        return self.prompt_ids + self.completion_ids

    def record(self, reward: float, info: dict[str, Any]) -> None:
        """Add one step's reward parts (as the env reported them)."""
        parts = info[keys.REWARD_PARTS]
        self.env_reward += reward
        self.verification += parts["verification"]
        self.penalty += parts["penalty"]
        if parts["correctness"] is not None:
            self.correctness = parts["correctness"]
        self.unscorable = bool(info[keys.UNSCORABLE])
        self.correct = info[keys.CORRECT]
        self.answer = info[keys.ANSWER]


def _guarded(call: Callable[[], Any]) -> tuple[Any, Exception | None]:
    """``call()``'s result, or the exception it raised (one env's fault, not the batch's)."""
    try:
        return call(), None
    except Exception as exc:  # noqa: BLE001 - recorded on its episode by _end_by_fault
        return None, exc


def _end_by_fault(episode: TokenEpisode, exc: Exception) -> None:
    """End an episode whose env raised: excluded from training (no advantage, no share
    of its group's baseline), as the step-wise layout's ``Attempt`` statuses are."""
    boundary = "sandbox" if isinstance(exc, SandboxError) else "error"
    episode.unscorable, episode.done = True, True
    episode.error = f"{boundary}: {type(exc).__name__}: {exc}"


def _reset(env: Any, start: Start, fmt: ChatFormat) -> tuple[TokenEpisode, dict[str, Any]]:
    episode = TokenEpisode(start=start)
    began, fault = _guarded(lambda: env.reset(seed=start.seed,
                                              options={"task_id": start.task_id}))
    if fault is not None:
        # The workspace could not be staged (or the env broke): kept as an excluded
        # episode, never a crash of the whole batch.
        episode.prompt_ids = fmt.first(f"(task {start.task_id} could not start)")
        episode.add(fmt.eos_ids[:1], sampled=False)
        _end_by_fault(episode, fault)
        return episode, {}
    obs, info = began
    episode.prompt_ids = fmt.first(obs)
    episode.observations.append(obs)
    episode.prefill = info.get(keys.PREFILL, "")
    episode.add(fmt.encode(episode.prefill) if episode.prefill else [], sampled=False)
    return episode, info


def _take_turn(episode: TokenEpisode, ids: list[int], logprobs: list[float] | None,
               limit: int, fmt: ChatFormat) -> list[int]:
    """Keep the sampled ids up to the first end-of-turn (or ``limit``); close the turn."""
    cut = len(ids)
    for i, tok in enumerate(ids):
        if tok in fmt.eos_ids:
            cut = i + 1
            break
    cut = min(cut, limit)
    ids = ids[:cut]
    episode.add(ids, sampled=True, logprobs=None if logprobs is None else logprobs[:cut])
    if not ids or ids[-1] not in fmt.eos_ids:
        episode.add(fmt.eos_ids[:1], sampled=False)
    return [tok for tok in ids if tok not in fmt.eos_ids]


def play_episodes(envs: Sequence[Any], starts: Sequence[Start], sample: Sampler,
                  fmt: ChatFormat, *, max_completion_length: int, max_turn_tokens: int,
                  pool: ThreadPoolExecutor,
                  any_active: Callable[[bool], bool] = lambda local: local,
                  fixed_width: bool = False,
                  timings: dict[str, float] | None = None) -> list[TokenEpisode]:
    """Play one episode per start, each in its own env, sampling turns in lockstep.

    Args:
        envs: One (wrapped) ``VeraEnv`` per start.
        starts: Task id and seed of each episode.
        sample: The model (see ``Sampler``).
        fmt: The chat format of the model's tokenizer.
        max_completion_length: Tokens allowed after the prompt (turns and observations).
        max_turn_tokens: Tokens one model turn may sample.
        pool: Threads that step the envs.
        any_active: Whether any process still has a live episode (distributed training:
            every process must sample the same number of times).
        fixed_width: Sample for every episode each round, finished ones with a one-token
            dummy context (backends that gather prompts across processes need equal
            counts).
        timings: When given, ``sample_s``, ``env_s`` and ``rounds`` are added to it.

    Returns:
        The episodes, in the order of ``starts``.
    """
    if len(envs) != len(starts):
        raise ValueError(f"need one env per start, got {len(envs)} envs for {len(starts)}")
    if max_turn_tokens < 1 or max_completion_length < 2:
        raise ValueError("max_turn_tokens must be >= 1 and max_completion_length >= 2")
    began = list(pool.map(lambda pair: _reset(pair[0], pair[1], fmt), zip(envs, starts, strict=False)))
    episodes = [episode for episode, _ in began]
    while any_active(any(not e.done for e in episodes)):
        live = [i for i, e in enumerate(episodes) if not e.done]
        rooms = {i: min(max_turn_tokens,
                        max_completion_length - len(episodes[i].completion_ids) - 1)
                 for i in live}
        asked = list(range(len(episodes))) if fixed_width else live
        contexts = [episodes[i].context if i in rooms else list(fmt.eos_ids[:1]) for i in asked]
        budget = max([*rooms.values(), 1])
        began_at = time.perf_counter()
        outputs = dict(zip(asked, sample(contexts, budget) if contexts else [], strict=True))
        sampled_at = time.perf_counter()
        actions = {i: episodes[i].prefill + fmt.decode(
            _take_turn(episodes[i], *outputs[i], rooms[i], fmt)) for i in live}
        steps = list(pool.map(lambda i, turns=actions: _guarded(lambda: envs[i].step(turns[i])),
                              live))
        if timings is not None:
            timings["sample_s"] = timings.get("sample_s", 0.0) + sampled_at - began_at
            timings["env_s"] = timings.get("env_s", 0.0) + time.perf_counter() - sampled_at
            timings["rounds"] = timings.get("rounds", 0.0) + 1
        for i, (result, fault) in zip(live, steps, strict=True):
            if fault is not None:
                episodes[i].actions.append(actions[i])
                _end_by_fault(episodes[i], fault)
                continue
            obs, reward, terminated, truncated, info = result
            _after_step(episodes[i], actions[i], obs, reward, terminated or truncated, info,
                        fmt, max_completion_length)
    return episodes


def _after_step(episode: TokenEpisode, action: str, obs: str, reward: float, ended: bool,
                info: dict[str, Any], fmt: ChatFormat, max_completion_length: int) -> None:
    """Record the step; append the next observation (and prefill) if it fits."""
    episode.actions.append(action)
    episode.record(reward, info)
    if ended:
        episode.done = True
        return
    prefill = info.get(keys.PREFILL, "")
    suffix = fmt.observation(obs) + (fmt.encode(prefill) if prefill else [])
    # +2: at least one sampled token and the end-of-turn must still fit.
    if len(episode.completion_ids) + len(suffix) + 2 > max_completion_length:
        episode.done = episode.out_of_tokens = True
        return
    episode.observations.append(obs)
    episode.prefill = prefill
    episode.add(suffix, sampled=False)
