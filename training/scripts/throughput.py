"""Measure the GRPO loop's throughput with a random-weight model (no hub, no download).

    python -m vera_env.training.scripts.throughput --shape tiny            # CPU: the plumbing's own cost
    python -m vera_env.training.scripts.throughput --shape 0.5b --bf16     # GPU: a Qwen2.5-0.5B-shaped body

The model is built from a ``Qwen2Config`` with random weights and the locally trained
2k-token tokenizer (``vera_env.training.tiny``), saved to a folder and trained by
``vera_env.training.scripts.grpo.main`` exactly as a real run would be — real env, real sandbox, real
checks, every ``vera_env.training.scripts.grpo`` flag (``--layout``, batch sizes, budgets) as given; the
random model is saved under ``--output-dir``. Random weights never write a valid turn,
so this measures the cost of the loop (sampling, env steps, the update), not learning;
with the 2k vocabulary, ``0.5b`` has Qwen2.5-0.5B's transformer body (24 layers, width
896) but not its 152k-token embedding. Prints one JSON object: seconds per optimizer step and where they went.

The environment flags default to the package's (``vera_env.training.envs.EnvOptions``):
50 steps behind ``gate`` and ``forced``. The CPU numbers in ``benchmarks/README.md``
were measured when ``grpo`` defaulted to 6 steps and ``forced`` alone; add
``--env-max-steps 6 --wrappers forced`` to compare with them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from vera_env.training.scripts import grpo

SHAPES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2},
    "0.5b": {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
             "num_attention_heads": 14, "num_key_value_heads": 2},
}


@dataclass
class Args(grpo.Args):
    """Throughput of vera_env.training.scripts.grpo with a random-weight model (every grpo flag applies;
    the model is the random one)."""

    shape: Literal["tiny", "0.5b"] = "tiny"
    """Model body: tiny (CPU) or a Qwen2.5-0.5B-shaped one (GPU)."""


def build_model(shape: str, folder: Path) -> Path:
    """Save a random-weight model of ``shape`` and the tiny tokenizer to ``folder``."""
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, Qwen2Config  # noqa: PLC0415

    from vera_env.training.tiny import tiny_tokenizer  # noqa: PLC0415

    tokenizer = tiny_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=32_768,
                         tie_word_embeddings=False, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=None,
                         **SHAPES[shape])
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def main(args: Args) -> dict[str, Any]:
    """Build, train ``train_steps`` steps, report."""
    folder = build_model(args.shape, Path(args.output_dir) / "model")
    run = dataclasses.replace(args, model=str(folder), tiny=False, save_final=False)
    started = time.perf_counter()
    trainer = grpo.main(run)
    wall = time.perf_counter() - started
    steps = [h for h in trainer.state.log_history if "step_time" in h]
    timings = trainer.rollout.timings
    sampled = sum(h["completions/mean_length"] * h["stepwise/samples"] for h in steps)
    report = {
        "args": asdict(args), "wall_s": round(wall, 2),
        "step_s": [round(h["step_time"], 2) for h in steps],
        "sample_s": round(timings.get("sample_s", 0.0), 4),
        "env_s": round(timings.get("env_s", 0.0), 4), "rounds": timings.get("rounds", 0),
        "episodes": int(timings.get("episodes", 0)),
        "sampled_tokens_per_s": round(sampled / max(timings.get("sample_s", 0.0), 1e-9), 1),
        "mean_reward": [round(h["reward"], 4) for h in steps],
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    from vera_env.training.arguments import parse_args

    main(parse_args(Args))
