"""The model and tokenizer a fine-tuning script starts from (``grpo`` and ``sft``).

``--tiny``: a random-weight tiny model and a locally trained tokenizer
(``vera_env.training.tiny``; CPU, no hub). Otherwise ``--model`` (a folder or hub id)
through ``AutoModelForCausalLM`` and ``AutoTokenizer``, in bfloat16 with ``--bf16``. Then
the ``--adapter`` folders are merged in and, with ``--lora-rank``, a fresh adapter wraps
the result (``vera_env.training.adapters.prepare``).

The two scripts differ only in how they call this: ``grpo`` asks for a tokenizer that
pads on the left (prompts are padded on the left for generation) and first refuses
``--tiny`` with ``--beta > 0`` (TRL rebuilds the reference model from a model folder,
and the tiny model has none); ``sft`` keeps the tokenizer's own padding side.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from vera_env.training.adapters import LoraSettings, prepare, write_stack

__all__ = ["ModelArgs", "load_model", "save_model"]


class ModelArgs(LoraSettings, Protocol):
    """What ``load_model`` reads of a script's ``Args``: ``grpo.Args`` and ``sft.Args``
    both have these fields (``bf16`` and ``activation_checkpointing`` from
    ``vera_env.training.resume.RunOptions``, the LoRA ones from ``LoraOptions``)."""

    model: str
    tiny: bool
    seed: int
    bf16: bool
    activation_checkpointing: bool


def load_model(args: ModelArgs, *,
               padding_side: Literal["left", "right"] | None = None) -> tuple[Any, Any]:
    """The model and tokenizer named by ``args`` (a tiny local pair with ``--tiny``),
    ``--adapter`` folders merged in, wrapped in a fresh adapter with ``--lora-rank``.

    Args:
        args: The script's parsed flags.
        padding_side: The tokenizer's padding side for ``--model``; None keeps the one
            its folder says (the tiny tokenizer pads on the left either way).

    Raises:
        SystemExit: Neither ``--model`` nor ``--tiny`` was given.
    """
    model, tokenizer = _load_base(args, padding_side)
    return prepare(model, args, checkpointing=args.activation_checkpointing), tokenizer


def save_model(trainer: Any, tokenizer: Any, args: ModelArgs, output_dir: str) -> None:
    """What a fine-tuning script leaves in ``output_dir``: the trained model (the adapter
    alone with ``--lora-rank``), its tokenizer and, for an adapter, the stack it was
    trained on (``adapters.write_stack``: the base and the ``--adapter`` folders under it)."""
    trainer.save_model(output_dir)
    tokenizer.save_pretrained(output_dir)
    if args.lora_rank:
        write_stack(output_dir, "tiny" if args.tiny else args.model, args.adapter)


def _load_base(args: ModelArgs, padding_side: Literal["left", "right"] | None) -> tuple[Any, Any]:
    if args.tiny:
        from vera_env.training.tiny import tiny_model, tiny_tokenizer  # noqa: PLC0415

        tokenizer = tiny_tokenizer()
        return tiny_model(tokenizer, seed=args.seed), tokenizer
    if not args.model:
        raise SystemExit("give --model PATH (a chat model) or --tiny")
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    side = {} if padding_side is None else {"padding_side": padding_side}
    tokenizer = AutoTokenizer.from_pretrained(args.model, **side)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    return AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype), tokenizer
