"""Transcripts as token ids for supervised training, through the model's chat template.

Why ids, never re-rendered text. A policy-gradient update must score exactly the tokens
the policy sampled. Rendering the transcript back into a chat and re-tokenizing it
changes them — a BPE merge across a turn boundary, a template that strips whitespace or
earlier ``<think>`` blocks — and the update then trains tokens the model never produced.
So a concatenated episode is built by concatenation only: the first prompt, then each
model turn's sampled ids, then each later observation as the token suffix the chat
template puts after an assistant turn (``ChatFormat.observation``). GRPO plays episodes
in ``vera_env.training.lockstep`` and packs them in ``vera_env.training.packing``;
supervised training lays collected transcripts out with ``tokenize_transcript``.

This module needs no torch: only a tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

__all__ = ["IGNORE", "ChatFormat", "Layout", "tokenize_transcript"]

IGNORE = -100
"""Label of a token that earns no loss (observations, prompts)."""

Layout = Literal["episode", "turns"]
"""How a transcript becomes training sequences: the whole episode as one sequence (the
context GRPO trains in), or one sequence per turn, each from its observation alone (the
context ``OpenAIChatPolicy`` and ``TransformersPolicy`` give a model)."""


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
            raise ValueError("the tokenizer has no chat_template; set one (see vera_env.training.tiny)")
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
                        system_prompt: str = "",
                        learn: Sequence[bool] = ()) -> list[tuple[list[int], list[int]]]:
    """A played transcript as ``(input_ids, labels)`` sequences for supervised training.

    ``observations[i]`` is what the policy saw before ``actions[i]``. Labels are the ids
    on action tokens and each turn's closing end-of-turn token, ``IGNORE`` elsewhere.
    In the ``turns`` layout each sequence's context is exactly what an evaluation policy
    is conditioned on (``vera_env.policies.chat.prompt_ids``: system prompt, observation, and the
    turn's prefill ``prefills[i]``, which the action then starts with and which is not
    labelled). A turn with ``learn[i]`` False (a teacher's deliberate mistake: the
    collected row's ``learn``) is context only: no sequence of its own in ``turns``,
    ``IGNORE`` labels in ``episode``.

    Raises:
        ValueError: Not one observation per action (or ``learn`` flag, when given), or
            an unknown layout.
    """
    if len(observations) != len(actions) or not actions:
        raise ValueError(f"need one observation per action, got {len(observations)} "
                         f"observations for {len(actions)} actions")
    if learn and len(learn) != len(actions):
        raise ValueError(f"need one learn flag per action, got {len(learn)} for "
                         f"{len(actions)} actions")
    if layout not in ("episode", "turns"):
        raise ValueError(f"layout must be 'episode' or 'turns', got {layout!r}")
    learned = list(learn) or [True] * len(actions)
    if layout == "turns":
        return [_turn_sequence(fmt, obs, action, prefill, system_prompt)
                for obs, action, prefill, keep in zip(
                    observations, actions, list(prefills) or [""] * len(actions), learned,
                    strict=False) if keep]
    ids: list[int] = []
    labels: list[int] = []
    for i, (obs, action) in enumerate(zip(observations, actions, strict=False)):
        context = fmt.first(obs) if i == 0 else fmt.observation(obs)
        turn = fmt.encode(action) + list(fmt.eos_ids[:1])
        ids += context + turn
        labels += [IGNORE] * len(context) + (turn if learned[i] else [IGNORE] * len(turn))
    return [(ids, labels)]


def _turn_sequence(fmt: ChatFormat, observation: str, action: str, prefill: str,
                   system_prompt: str) -> tuple[list[int], list[int]]:
    from vera_env.policies.chat import prompt_ids  # noqa: PLC0415 - policies import vera_env only

    if prefill and not action.startswith(prefill):
        prefill = ""  # the policy did not continue the prefill: train the whole turn
    context = prompt_ids(fmt.tokenizer, observation, prefill=prefill,
                         system_prompt=system_prompt)
    turn = fmt.encode(action[len(prefill):]) + list(fmt.eos_ids[:1])
    return context + turn, [IGNORE] * len(context) + turn
