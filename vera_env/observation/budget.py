"""Fitting text into budgets: token estimates and middle clipping.

Bounded context is the method's whole claim. The seed measured transcript replay at
9,267 tokens per step to deliver ~400 new tokens, and an uncapped recent window once
reached ~324 KB per prompt (four tool outputs at 20k chars each) — big enough that the
serving shim returned HTTP 500 and 68 of 70 problems died as provider timeouts. So every
piece of an observation is fitted to a budget here, with one estimator, before it is sent.

The estimator counts word pieces and punctuation, which tracks BPE token counts of
English, shell and numbers closely enough to bound a prompt without a tokenizer (the
package must not depend on one). It overestimates rather than underestimates: a budget
it says is met is met by any common BPE vocabulary within a small factor.
"""

from __future__ import annotations

import re

__all__ = ["clip_middle", "count_tokens", "fit_tokens"]

# A run of up to four word characters, or one other non-space character, is one token.
# Long words cost several tokens, as they do under BPE.
_TOKEN = re.compile(r"\w{1,4}|[^\w\s]")


def count_tokens(text: str) -> int:
    """Estimate the number of tokens in ``text``.

    Args:
        text: Any string.

    Returns:
        A non-negative estimate, 0 for the empty string.
    """
    if not text:
        return 0
    return sum(1 for _ in _TOKEN.finditer(text))


def clip_middle(text: str, budget_chars: int) -> str:
    """Trim ``text`` to ``budget_chars`` characters, keeping both ends.

    The head carries what a command produced; the tail carries any traceback. Cutting
    either loses the reason the step happened, so the middle goes, with a marker that
    says how much.

    Args:
        text: The text to trim.
        budget_chars: The most characters the result may have.

    Returns:
        ``text`` unchanged when it fits, else head + elision marker + tail, never longer
        than ``budget_chars``.
    """
    text = text or ""
    if budget_chars <= 0:
        return ""
    if len(text) <= budget_chars:
        return text
    marker = f"\n...[{len(text)} chars, middle elided]...\n"
    room = budget_chars - len(marker)
    if room < 2:
        return text[:budget_chars]
    head = room // 2
    tail = room - head
    return f"{text[:head]}{marker}{text[len(text) - tail:]}"


def fit_tokens(text: str, budget_tokens: int) -> str:
    """Clip ``text`` in the middle until its token estimate fits ``budget_tokens``."""
    if count_tokens(text) <= budget_tokens:
        return text
    if budget_tokens <= 0:
        return ""
    chars = len(text)
    while chars > 0:
        chars = int(chars * 0.8)
        clipped = clip_middle(text, chars)
        if count_tokens(clipped) <= budget_tokens:
            return clipped
    return ""
