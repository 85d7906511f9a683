"""Samplers over a GRPOTrainer's own model: transformers ``generate`` or TRL's vLLM.

A sampler takes token-id contexts and returns one sampled turn per context (see
``vera_env.training.lockstep.Sampler``). Both read the trainer's generation settings
(temperature, top_p, top_k, ...) so the rollout samples as ``GRPOConfig`` says.

vLLM goes through ``trainer.vllm_generation`` — server and colocate alike; TRL already
pushes the current weights to vLLM before calling ``rollout_func``. Its ``generate``
reads ``max_completion_length`` as the per-call token cap, so the cap is set for the
call and restored after, and ``num_generations=1`` is passed because each context is a
different episode state (the trainer's own path dedupes prompts by group, which would
be wrong here).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

__all__ = ["HFSampler", "VLLMSampler", "trainer_sampler"]


class HFSampler:
    """Samples with ``model.generate`` on the trainer's (unwrapped) model.

    Args:
        trainer: A ``trl.GRPOTrainer`` built with ``use_vllm=False``.
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.pad_id = trainer.processing_class.pad_token_id
        self.eos_ids = set(trainer.eos_token_ids)

    def __call__(self, contexts: list[list[int]], max_new_tokens: int
                 ) -> list[tuple[list[int], list[float] | None]]:
        from trl.models import unwrap_model_for_generation  # noqa: PLC0415

        trainer = self.trainer
        width = max(len(c) for c in contexts)
        ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):  # left padding: generation continues each row
            ids[row, width - len(context):] = torch.tensor(context)
            mask[row, width - len(context):] = 1
        config = copy.deepcopy(trainer.generation_config)
        config.max_new_tokens = max_new_tokens
        # Explicit, not inherited: transformers 5 copies TrainingArguments.use_cache (False
        # by default) onto model.config, and without its KV cache generate recomputes the
        # whole context every token (33 tokens on a 3k context: 74 s instead of 5 s, CPU).
        config.use_cache = True
        device = trainer.accelerator.device
        with unwrap_model_for_generation(
                trainer.model_wrapped, trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                generation_kwargs=trainer.generation_kwargs,
                gradient_checkpointing_kwargs=trainer.args.activation_checkpointing_kwargs,
        ) as model, torch.no_grad():
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                 generation_config=config)
        turns: list[tuple[list[int], list[float] | None]] = []
        for row in out[:, width:].tolist():
            cut = next((i + 1 for i, tok in enumerate(row) if tok in self.eos_ids), len(row))
            turns.append((row[:cut], None))
        return turns


class VLLMSampler:
    """Samples with TRL's vLLM backend (``use_vllm=True``, server or colocate mode).

    Args:
        trainer: A ``trl.GRPOTrainer`` built with ``use_vllm=True``.
    """

    def __init__(self, trainer: Any) -> None:
        self.generation = trainer.vllm_generation

    def __call__(self, contexts: list[list[int]], max_new_tokens: int
                 ) -> list[tuple[list[int], list[float] | None]]:
        generation = self.generation
        cap = generation.max_completion_length
        generation.max_completion_length = max_new_tokens
        try:
            _, completions, logprobs, _ = generation.generate(
                prompts=contexts, images=None, num_generations=1)
        finally:
            generation.max_completion_length = cap
        if logprobs is None:
            return [(list(ids), None) for ids in completions]
        # vLLM reports top-k logprobs per position; the first is the sampled token's.
        return [(list(ids), [float("nan") if lp[0] is None else lp[0] for lp in seq])
                for ids, seq in zip(completions, logprobs, strict=True)]


def trainer_sampler(trainer: Any) -> HFSampler | VLLMSampler:
    """The sampler that fits how ``trainer`` was configured."""
    return VLLMSampler(trainer) if trainer.use_vllm else HFSampler(trainer)
