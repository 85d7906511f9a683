"""A sampler that plays fixed turns for chosen members of a step-wise group, the model for the rest.

Step-wise contexts carry one observation each, never the transcript, so a member is
recognised by what it left in that observation: at its first turn by its position among
identical first prompts, later by a signature its own earlier turn left there (its
command in the command window, its node's summary in the analysis section).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable


class StepScripted:
    """Wraps a sampler; plays ``plans[marker][member]`` for the episodes it recognises.

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
        self.inner, self.tokenizer, self.plans, self.first = inner, tokenizer, plans, first
        self.model_tokens = model_tokens
        self.played: list[str] = []

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

    def __call__(self, contexts: list[list[int]], max_new_tokens: int) -> list:
        seen: Counter = Counter()
        texts = [self.tokenizer.decode(c) for c in contexts]
        scripted = {i: t for i, text in enumerate(texts)
                    if (t := self._turn(text, seen)) is not None}
        rest = [i for i in range(len(contexts)) if i not in scripted]
        out = dict(zip(rest, self.inner([contexts[i] for i in rest],
                                        min(max_new_tokens, self.model_tokens))
                       if rest else []))
        for i, text in scripted.items():
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            ids.append(self.tokenizer.eos_token_id)
            self.played.append(text)
            out[i] = (ids, None)
        return [out[i] for i in range(len(contexts))]
