"""LoRA through ``vera_env.training.scripts.sft``: only the adapter trains, the saved adapter is
small, and base + adapter reloaded (merged) reproduces the trained model's logits."""

from __future__ import annotations

import json
import math

import pytest
import torch

from vera_env.tasks import load_tasks
from vera_env.training.adapters import (
    ADAPTER_STACK,
    ALL_LINEAR,
    LLAMA_PROJECTIONS,
    is_adapter,
    merge_adapters,
    save_merged,
    target_modules,
)
from vera_env.training.arguments import parse_args
from vera_env.training.collection import collect, write_rows
from vera_env.training.envs import EnvOptions, make_env
from vera_env.training.scripts import sft
from vera_env.training.starts import Start


@pytest.fixture(scope="module")
def lora_sft(tmp_path_factory):
    """Two SFT steps of a rank-4 adapter over a saved tiny base, on one oracle episode."""
    from vera_env.policies import OraclePolicy
    from vera_env.training.tiny import build_tiny

    root = tmp_path_factory.mktemp("lora_sft")
    base = build_tiny(root / "base")
    tasks = load_tasks("builtin")
    rows = collect(tasks, OraclePolicy(tasks), [Start("seq.motif_count.easy.s0", 0)],
                   make_env_fn=lambda: make_env(tasks, EnvOptions(env_max_steps=10, wrappers=("forced",))),
                   concurrency=1, policy_name="oracle")
    data = write_rows(rows, root / "oracle.jsonl")
    out = root / "adapter"
    args = parse_args(sft.Args, ["--model", str(base), "--rollouts", str(data),
                                 "--lora-rank", "4", "--train-steps", "2",
                                 "--learning-rate", "1e-2", "--gradient-accumulation-steps", "1",
                                 "--per-device-train-batch-size", "2", "--output-dir", str(out)])
    trainer = sft.main(args)
    return {"base": base, "out": out, "trainer": trainer, "root": root}


def _logits(model, ids: list[int]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits


def test_lora_sft_changes_only_adapter_weights(lora_sft):
    from transformers import AutoModelForCausalLM

    model = lora_sft["trainer"].model
    fresh = dict(AutoModelForCausalLM.from_pretrained(str(lora_sft["base"])).named_parameters())
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    # every one of the 7 projections of both layers carries an adapter
    assert {n.split(".")[-4] for n in trainable} == set(LLAMA_PROJECTIONS)
    base = model.get_base_model()
    for name, value in base.named_parameters():
        if "lora_" not in name:
            assert torch.equal(value.detach(), fresh[name.replace(".base_layer", "")]), name
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    assert any(p.abs().sum() > 0 for p in lora_b)  # initialised at zero, trained away from it
    losses = [h["loss"] for h in lora_sft["trainer"].state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(float(x)) for x in losses)


def test_lora_sft_saves_a_small_adapter_and_its_stack(lora_sft):
    out, base = lora_sft["out"], lora_sft["base"]
    assert is_adapter(out) and not (out / "model.safetensors").exists()
    adapter_bytes = (out / "adapter_model.safetensors").stat().st_size
    assert adapter_bytes < (base / "model.safetensors").stat().st_size / 5
    stack = json.loads((out / ADAPTER_STACK).read_text())
    assert stack == {"base": str(base), "under": []}


def test_lora_sft_reloaded_adapter_reproduces_the_trained_logits(lora_sft, tmp_path):
    from transformers import AutoModelForCausalLM

    ids = list(range(5, 45))
    trained = _logits(lora_sft["trainer"].model, ids)
    merged = merge_adapters(AutoModelForCausalLM.from_pretrained(str(lora_sft["base"])),
                            [lora_sft["out"]])
    assert not hasattr(merged, "peft_config")  # a plain model: merged, unloaded
    assert torch.allclose(_logits(merged, ids), trained, atol=1e-4)
    untrained = _logits(AutoModelForCausalLM.from_pretrained(str(lora_sft["base"])), ids)
    assert not torch.allclose(untrained, trained, atol=1e-4)
    folder = save_merged(lora_sft["base"], [lora_sft["out"]], tmp_path / "merged")
    saved = AutoModelForCausalLM.from_pretrained(str(folder))
    assert torch.allclose(_logits(saved, ids), trained, atol=1e-4)
    assert (folder / "tokenizer_config.json").is_file()


def test_lora_sft_adapter_flag_merges_before_training(lora_sft):
    """``--adapter`` on sft/grpo: the model they start from is base + adapter, merged."""
    args = sft.Args(model=str(lora_sft["base"]), adapter=(str(lora_sft["out"]),))
    model, _ = sft.load_model(args)
    ids = list(range(5, 45))
    assert torch.allclose(_logits(model, ids), _logits(lora_sft["trainer"].model, ids),
                          atol=1e-4)


def test_merge_adapters_refuses_a_folder_without_an_adapter(lora_sft):
    with pytest.raises(FileNotFoundError, match="no adapter in"):
        merge_adapters(object(), [lora_sft["base"]])


def test_target_modules_default_falls_back_to_all_linear_explicit_must_exist():
    class Mlp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    assert target_modules(Mlp(), LLAMA_PROJECTIONS) == ALL_LINEAR
    assert target_modules(Mlp(), ("fc1",)) == ["fc1"]
    assert target_modules(Mlp(), (ALL_LINEAR,)) == ALL_LINEAR
    with pytest.raises(ValueError, match=r"\['q_proj'\] are not linear layers"):
        target_modules(Mlp(), ("fc1", "q_proj"))


@pytest.mark.parametrize(("flags", "message"), [
    (["--lora-rank", "-1"], "--lora-rank must be >= 0"),
    (["--lora-rank", "4", "--lora-alpha", "0"], "--lora-alpha must be > 0"),
    (["--lora-rank", "4", "--trainable-layers", "2"], "give one"),
])
def test_parse_args_bad_lora_options_exit_saying_why(flags, message, capsys):
    with pytest.raises(SystemExit):
        parse_args(sft.Args, ["--tiny", *flags])
    assert message in capsys.readouterr().err


def test_collect_adapter_flag_samples_from_base_plus_adapter_merged(lora_sft):
    from vera_env.training.scripts import collect as collect_script

    tasks = load_tasks("builtin")
    args = parse_args(collect_script.Args, ["--policy", "transformers", "--model",
                                            str(lora_sft["base"]), "--adapter",
                                            str(lora_sft["out"])])
    policy = collect_script.make_policy(args, tasks, [])
    assert not hasattr(policy.model, "peft_config")
    ids = list(range(5, 45))
    assert torch.allclose(_logits(policy.model, ids), _logits(lora_sft["trainer"].model, ids),
                          atol=1e-4)
    oracle = parse_args(collect_script.Args, ["--adapter", str(lora_sft["out"])])
    with pytest.raises(SystemExit, match="--adapter needs --policy transformers"):
        collect_script.make_policy(oracle, tasks, [])
