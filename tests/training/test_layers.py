"""Training only the top layers (the CPU knob of the real-model benchmark)."""

from __future__ import annotations

import pytest

from vera_env.training.layers import train_top_layers


def test_train_top_layers_freezes_all_but_the_top_and_final_norm(tokenizer):
    from vera_env.training.tiny import tiny_model

    model = tiny_model(tokenizer, num_layers=3)
    total = sum(p.numel() for p in model.parameters())
    assert train_top_layers(model, 0) == total
    kept = train_top_layers(model, 1)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".layers.2." in n or n == "model.norm.weight" for n in trainable)
    assert kept == sum(p.numel() for n, p in model.named_parameters() if n in trainable)
    with pytest.raises(ValueError, match=">= 0"):
        train_top_layers(model, -1)
