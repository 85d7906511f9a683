"""A sampler that plays fixed turns for chosen members of a group, the model for the rest.

A random tiny model never writes a valid turn, so on its own it would exercise only the
rejection path. Scripting some members makes the same GRPO run also go through real
commands, real checks, a correct answer and an unscorable grade — and gives the group
different rewards, hence advantages and a gradient.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

ASSISTANT = "<|im_start|>assistant\n"


class ScriptedTurns:
    """Wraps a sampler; plays ``plans[marker][member]`` for the episodes it matches.

    Args:
        inner: The model's sampler, for every turn not scripted.
        tokenizer: The tiny ChatML tokenizer.
        plans: For a text found in a task's first observation (its question), the turns
            to play for the k-th member of the group (its position among identical first
            contexts). Later turns find their member by its first turn in the context, so
            members' first turns must differ.
        model_tokens: Cap on a model turn (a random model rarely samples EOS; short
            turns keep the test fast while scripted turns stay whole).
    """

    def __init__(self, inner: Callable, tokenizer: Any,
                 plans: dict[str, dict[int, list[str]]], *, model_tokens: int = 48) -> None:
        self.inner, self.tokenizer, self.plans = inner, tokenizer, plans
        self.model_tokens = model_tokens
        self.scripted_ids: list[list[int]] = []

    def _turn(self, text: str, seen: Counter) -> str | None:
        turn = text.count(ASSISTANT) - 1
        for marker, members in self.plans.items():
            if marker not in text:
                continue
            if turn == 0:
                script = members.get(seen[marker])
                seen[marker] += 1
            else:
                script = next((s for s in members.values()
                               if ASSISTANT + s[0] + "<|im_end|>" in text), None)
            if script and turn < len(script):
                return script[turn]
        return None

    def __call__(self, contexts: list[list[int]], max_new_tokens: int) -> list:
        seen: Counter = Counter()
        texts = [self.tokenizer.decode(c) for c in contexts]
        scripted = {i: t for i, text in enumerate(texts)
                    if (t := self._turn(text, seen)) is not None}
        rest = [i for i in range(len(contexts)) if i not in scripted]
        out = dict(zip(rest, self.inner([contexts[i] for i in rest],
                                               min(max_new_tokens, self.model_tokens))
                       if rest else [], strict=False))
        for i, text in scripted.items():
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            ids.append(self.tokenizer.eos_token_id)
            self.scripted_ids.append(ids)
            out[i] = (ids, None)
        return [out[i] for i in range(len(contexts))]
