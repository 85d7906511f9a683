"""The one path from an observation to what a chat model is conditioned on.

Evaluation and training must show a model the same thing, or training optimises a
policy on contexts it never meets at evaluation. The first training layout did exactly
that: GRPO concatenated every observation into one growing sequence while
``OpenAIChatPolicy`` and ``TransformersPolicy`` showed one observation per turn (issue
12). So the chat messages of a turn (an optional system message, then the observation
as the one user message) and, for a local tokenizer, the exact prompt text and ids (the
chat template with its generation prompt, then the prefill that a forced answer starts
with, as vLLM's ``continue_final_message`` continues it) are built here and nowhere
else: ``OpenAIChatPolicy`` sends ``chat_messages``, ``TransformersPolicy`` generates
from ``prompt_ids``, and step-wise training (``vera_env.training.lockstep``) trains on
``prompt_ids`` — byte for byte what the evaluation policy sees.

Tokenizing the rendered text (never the messages' ids plus the prefill's ids) is
deliberate: it is what ``TransformersPolicy`` has always done, and the prefill then
tokenizes in context, as a server that continues the final message would.

No torch here: a tokenizer is anything with ``apply_chat_template`` and ``__call__``.
"""

from __future__ import annotations

from typing import Any

from vera_env.observation.budget import clip_middle

__all__ = ["chat_messages", "prompt_ids", "prompt_text"]


def chat_messages(observation: str, system_prompt: str = "") -> list[dict[str, str]]:
    """The chat messages of one turn: the system prompt (if any), then the observation."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*system, {"role": "user", "content": observation}]


def prompt_text(tokenizer: Any, observation: str, *, prefill: str = "",
                system_prompt: str = "") -> str:
    """The exact text a local model is conditioned on for one turn.

    The tokenizer's chat template with the generation prompt, then ``prefill``; a
    tokenizer without a template gets the messages' contents joined by blank lines.
    """
    messages = chat_messages(observation, system_prompt)
    if getattr(tokenizer, "chat_template", None):
        text: str = tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=True)
    else:
        text = "\n\n".join(m["content"] for m in messages) + "\n\n"
    return text + prefill


def prompt_ids(tokenizer: Any, observation: str, *, prefill: str = "",
               system_prompt: str = "", max_tokens: int | None = None) -> list[int]:
    """``prompt_text`` as token ids (no special tokens added: the template has them).

    With ``max_tokens``, a longer prompt has its observation clipped in the middle
    (``clip_middle``: the question at its head and the turn's cue at its tail stay, as do
    the chat template and the prefill) until it fits. The env bounds observations in
    characters; a model's window is in tokens, and one printed matrix is about a token
    per character for SmolLM2 (an 11,676-token prompt, past its 8,192 positions).
    """
    def ids(obs: str) -> list[int]:
        text = prompt_text(tokenizer, obs, prefill=prefill, system_prompt=system_prompt)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    out = ids(observation)
    chars = len(observation)
    while max_tokens is not None and len(out) > max_tokens and chars > 0:
        # Shrink in proportion to the overshoot (a little more, so it converges fast).
        chars = min(chars - 1, int(chars * max_tokens / len(out) * 0.95))
        out = ids(clip_middle(observation, max(chars, 0)))
    return out
