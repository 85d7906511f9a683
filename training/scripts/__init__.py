"""The training scripts: each module is one entry point with a ``main()``.

Run as ``vera-env train NAME`` or ``python -m vera_env.training.scripts.NAME`` (``--help``
lists the flags). Each reads top to bottom: its ``Args`` dataclass (every flag, its
docstring the help), its setup, its one run. What they drive is the library one level
up, ``vera_env.training`` (training/README.md lists every module); the library never
imports a script.

* ``grpo`` — GRPO through the environment, the trainer's own model playing the episodes;
* ``collect`` — rollouts of any policy to a datasets-loadable JSONL/Parquet file;
* ``sft`` — expert iteration: ``SFTTrainer`` on filtered collected rollouts;
* ``checkpoint`` — a GGUF file, folder or wheel to a ``save_pretrained`` checkpoint;
* ``lora`` — saved LoRA adapters merged into a base model, saved as a model folder;
* ``throughput`` — seconds per GRPO step with a random-weight model, split into
  sampling, env steps and update.

Until 2026-12-07 the scripts were modules of ``vera_env.training`` itself
(``python -m vera_env.training.grpo``); ``vera-env train NAME`` is unchanged.
"""
