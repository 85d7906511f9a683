"""A tiny random-weight chat model and a tokenizer trained here, so training runs offline.

Why this exists. The training scripts must run end to end on a fresh clone, on CPU, with
no model hub (``HF_HUB_OFFLINE=1``) — in CI and for anyone checking the plumbing before
renting a GPU. A model built from a config needs a tokenizer, and none can be
downloaded, so one is trained in about a second on the environment's own text (the
protocol, builtin questions and reference solutions), with a ChatML chat template like
Qwen's: ``<|im_start|>role\\n...<|im_end|>\\n``, ``<|im_end|>`` being the end-of-turn
(EOS) token. The model emits garbage — it has random weights — which is exactly what a
plumbing test needs: every turn it samples is a malformed one the env must survive.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CHATML_TEMPLATE", "build_tiny", "tiny_model", "tiny_tokenizer"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""ChatML, as Qwen2.5 renders it without a default system prompt."""

_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _corpus() -> list[str]:
    """Text the tokenizer learns from: what the env shows and what a good agent writes."""
    from vera_env.observation.prompts import RULES  # noqa: PLC0415 - keep module import light
    from vera_env.tasks.builtin import TASK_TYPES, generate, task_id  # noqa: PLC0415
    from vera_env.wire.protocol import PROTOCOL  # noqa: PLC0415

    texts = [PROTOCOL, RULES]
    for task_type in TASK_TYPES:
        for seed in range(2):
            instance = generate(task_id(task_type, "easy", seed))
            texts.append(instance.question)
            texts.extend(instance.solution)
    return texts


def tiny_tokenizer(vocab_size: int = 2048) -> Any:
    """A byte-level BPE tokenizer with a ChatML template, trained locally.

    Args:
        vocab_size: Vocabulary size, special tokens included.

    Returns:
        A ``PreTrainedTokenizerFast`` (left padding, pad ``<|endoftext|>``, EOS ``<|im_end|>``).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=_SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    core.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<|endoftext|>",
                                        eos_token="<|im_end|>", bos_token=None,
                                        padding_side="left")
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def tiny_model(tokenizer: Any, *, hidden_size: int = 64, num_layers: int = 2,
               seed: int = 0) -> Any:
    """A random-weight Qwen2 causal LM sized for a CPU test (about 0.3M parameters).

    Args:
        tokenizer: The tokenizer whose vocabulary and special tokens the model uses.
        hidden_size: Width of the model.
        num_layers: Transformer layers.
        seed: Seed of the random weights.
    """
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, Qwen2Config  # noqa: PLC0415

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size,
                         intermediate_size=2 * hidden_size, num_hidden_layers=num_layers,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32_768, tie_word_embeddings=False,
                         pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_tiny(folder: str | Path, *, vocab_size: int = 2048, hidden_size: int = 64,
               num_layers: int = 2) -> Path:
    """Save a tiny model and its tokenizer to ``folder`` (loadable by ``from_pretrained``).

    Returns:
        ``folder``, as a ``Path``.
    """
    folder = Path(folder)
    tokenizer = tiny_tokenizer(vocab_size)
    model = tiny_model(tokenizer, hidden_size=hidden_size, num_layers=num_layers)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
