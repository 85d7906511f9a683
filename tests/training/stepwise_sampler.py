"""A sampler that plays fixed turns for chosen members of a step-wise group, the model for the rest.

Step-wise contexts carry one observation each, never the transcript, so a member is
recognised by what it left in that observation: at its first turn by its position among
identical first prompts, later by a signature its own earlier turn left there (its
command in the command window, its node's summary in the analysis section).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from scripted_sampler import ScriptedTurns


class StepScripted(ScriptedTurns):
    """Wraps a sampler; plays ``plans[marker][member]`` for the episodes it recognises
    (``ScriptedTurns``'s batching, with step-wise recognition of members).

    Args:
        inner: The model's sampler, for every turn not scripted.
        tokenizer: The tokenizer (to decode contexts and encode scripted turns).
        plans: For a text in a task's question, the turns of the k-th member, each plan
            a list of ``(signature, turn)``: the turn is played when its signature is in
            the context (``None``: the member's first turn).
        first: Text only a first observation holds (e.g. ``Steps left: 12.``).
        model_tokens: Cap on a model turn.
    """

    def __init__(self, inner: Callable, tokenizer: Any,
                 plans: dict[str, dict[int, list[tuple[str | None, str]]]], *,
                 first: str, model_tokens: int = 16) -> None:
        super().__init__(inner, tokenizer, plans, model_tokens=model_tokens)  # type: ignore[arg-type]
        self.first = first

    def _turn(self, text: str, seen: Counter) -> str | None:
        for marker, members in self.plans.items():
            if marker not in text:
                continue
            if self.first in text:
                plan = members.get(seen[marker])
                seen[marker] += 1
                return plan[0][1] if plan and plan[0][0] is None else None
            for plan in members.values():
                later = [turn for signature, turn in plan[1:] if signature and signature in text]
                if later:
                    return later[-1]
        return None
