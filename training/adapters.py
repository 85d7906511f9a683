"""LoRA adapters for ``vera_env.training.scripts.sft`` and ``vera_env.training.scripts.grpo``: state that fits in git.

The library half of LoRA; ``vera_env.training.scripts.lora`` is the script that merges saved
adapters into a model folder (``vera-env train lora``).

Why. A learning run on a CPU spans several sittings, and what a sitting trained must
outlive its machine. Full-parameter state of SmolLM2-135M is 540 MB in fp32 and 1.6 GB
with AdamW's moments; four runs lost it with their ``runs/`` folder. A rank-16 adapter on
every linear projection of its 30 layers is 4.9M parameters, about 10 MB in bf16: it is
committed, and the next sitting loads it. "LoRA Without Regret" (Schulman et al., 2025)
puts adapters on every layer, the MLP included, which is the default here.

The flags (``LoraOptions``, a dataclass base of both scripts' ``Args``):

* ``--lora-rank R`` trains an adapter of rank R (0, the default: every weight trains);
  the trainer's ``save_model`` then writes the adapter alone
  (``adapter_model.safetensors`` and ``adapter_config.json``) and its checkpoints hold
  the adapter and its optimizer state;
* ``--adapter A [B ...]`` loads the base model (``--model``), merges each adapter into it
  in order (``merge_and_unload``), and trains or samples from the result. A GRPO adapter
  trained on top of a merged SFT adapter is loaded as ``--adapter SFT GRPO``; each
  saved adapter records the stack it was trained on in ``adapter_stack.json``.

Merged weights are what sampling and evaluation use: a merged model is an ordinary
``transformers`` model, as fast as the base and readable by every policy. Only training
keeps the adapter apart. GRPO keeps ``--beta 0``: TRL's reference model for a PEFT
model is the adapter switched off, which the step-wise trainer does not compute.

    vera-env train lora --model BASE --adapter runs/sft runs/grpo --output runs/merged
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["ADAPTER_STACK", "ALL_LINEAR", "LLAMA_PROJECTIONS", "LoraOptions", "LoraSettings",
           "add_lora", "is_adapter", "merge_adapters", "prepare", "save_merged",
           "target_modules", "write_stack"]

LLAMA_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                     "down_proj")
"""The seven linear projections of a llama-like decoder layer (SmolLM2, Qwen2)."""
ALL_LINEAR = "all-linear"
"""PEFT's name for every linear layer but the output head."""
ADAPTER_STACK = "adapter_stack.json"
"""Beside a saved adapter: the base model and the adapters merged under it, in order."""


@dataclass
class LoraOptions:
    """LoRA options the fine-tuning scripts share (a dataclass base of their ``Args``)."""

    lora_rank: int = 0
    """Train a LoRA adapter of this rank instead of every weight (0: off). The output
    folder then holds the adapter alone (megabytes)."""
    lora_alpha: int = 32
    """LoRA scale numerator (the update is scaled by alpha / rank)."""
    lora_targets: tuple[str, ...] = LLAMA_PROJECTIONS
    """Module names the adapter wraps: by default the 7 linear projections of a
    llama-like layer (a model lacking one of them gets 'all-linear'); 'all-linear' for
    every linear layer but the output head."""
    adapter: tuple[str, ...] = ()
    """Adapter folders merged into --model, in order, before training (an SFT adapter,
    then a GRPO one trained on top of it)."""

    def check_lora(self) -> None:
        """Refuse a negative rank, a non-positive alpha or no target.

        Raises:
            ValueError: Says which option is wrong.
        """
        if self.lora_rank < 0:
            raise ValueError(f"--lora-rank must be >= 0 (0: off), got {self.lora_rank}")
        if self.lora_rank and self.lora_alpha <= 0:
            raise ValueError(f"--lora-alpha must be > 0, got {self.lora_alpha}")
        if self.lora_rank and not self.lora_targets:
            raise ValueError("--lora-targets is empty: name modules or 'all-linear'")


class LoraSettings(Protocol):
    """The LoRA fields ``add_lora`` and ``prepare`` read: a ``LoraOptions`` has them, so
    every script's ``Args`` does (and ``vera_env.training.models.ModelArgs`` extends this)."""

    lora_rank: int
    lora_alpha: int
    lora_targets: tuple[str, ...]
    adapter: tuple[str, ...]


def is_adapter(folder: str | Path) -> bool:
    """Whether ``folder`` holds a saved PEFT adapter (not a whole model)."""
    return (Path(folder) / "adapter_config.json").is_file()


def target_modules(model: Any, targets: Sequence[str]) -> list[str] | str:
    """The ``target_modules`` a ``LoraConfig`` gets for ``model``.

    The default projections fall back to ``all-linear`` on a model that lacks one of
    them; targets named explicitly must all exist.

    Raises:
        ValueError: An explicitly named target is not a linear layer of ``model``.
    """
    import torch  # noqa: PLC0415 - the training extra

    if tuple(targets) == (ALL_LINEAR,):
        return ALL_LINEAR
    linear = {name.rsplit(".", 1)[-1] for name, module in model.named_modules()
              if isinstance(module, torch.nn.Linear)}
    missing = [t for t in targets if t not in linear]
    if not missing:
        return list(targets)
    if tuple(targets) == LLAMA_PROJECTIONS:
        return ALL_LINEAR
    raise ValueError(f"--lora-targets {missing} are not linear layers of this model "
                     f"(it has {sorted(linear)}); name those, or 'all-linear'")


def add_lora(model: Any, options: LoraSettings, *, checkpointing: bool = False) -> Any:
    """``model`` wrapped in a fresh LoRA adapter (a ``PeftModel``): only it trains.

    Args:
        model: A ``transformers`` causal LM.
        options: Rank, alpha and targets.
        checkpointing: Activation checkpointing is on: the embeddings' output must then
            require a gradient, or a frozen base leaves the recomputed layers none.
    """
    from peft import LoraConfig, get_peft_model  # noqa: PLC0415 - the training extra

    config = LoraConfig(r=options.lora_rank, lora_alpha=options.lora_alpha,
                        target_modules=target_modules(model, options.lora_targets),
                        lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
    wrapped = get_peft_model(model, config)
    if checkpointing:
        wrapped.enable_input_require_grads()
    return wrapped


def prepare(model: Any, options: LoraSettings, *, checkpointing: bool = False) -> Any:
    """``model`` as a fine-tuning script trains it: the ``--adapter`` folders merged in,
    then wrapped in a fresh adapter where ``--lora-rank`` asks for one."""
    model = merge_adapters(model, options.adapter)
    if options.lora_rank:
        model = add_lora(model, options, checkpointing=checkpointing)
    return model


def merge_adapters(model: Any, adapters: Sequence[str | Path]) -> Any:
    """``model`` with each adapter merged into its weights, in order (a plain model).

    Raises:
        FileNotFoundError: A folder holds no adapter.
    """
    if not adapters:
        return model
    from peft import PeftModel  # noqa: PLC0415 - the training extra

    for folder in adapters:
        if not is_adapter(folder):
            raise FileNotFoundError(f"no adapter in {folder} (adapter_config.json missing)")
        model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    return model


def write_stack(output_dir: str | Path, base: str, adapters: Sequence[str]) -> Path:
    """Record, beside a saved adapter, the base and the adapters it was trained on."""
    path = Path(output_dir) / ADAPTER_STACK
    path.write_text(json.dumps({"base": base, "under": list(adapters)}, indent=1) + "\n",
                    encoding="utf-8")
    return path


def save_merged(base: str | Path, adapters: Sequence[str | Path], output: str | Path) -> Path:
    """Save ``base`` with ``adapters`` merged, and its tokenizer, as a model folder.

    The tokenizer comes from the last adapter's folder when it holds one (the scripts
    save it beside the adapter), else from ``base``.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    folders = [Path(a) for a in adapters]
    source = next((f for f in reversed(folders) if (f / "tokenizer_config.json").is_file()),
                  Path(base))
    model = merge_adapters(AutoModelForCausalLM.from_pretrained(str(base)), folders)
    out = Path(output)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(str(source)).save_pretrained(out)
    return out
