"""Training on the verification reward with TRL (needs the ``training`` extra).

The scripts are the subpackage ``scripts`` (``vera-env train NAME`` or ``python -m
vera_env.training.scripts.NAME``), each read top to bottom: its ``Args``, its setup,
its one run:

* ``grpo`` — GRPO through the environment, the trainer's own model playing the episodes;
* ``collect`` — rollouts of any policy to a datasets-loadable JSONL/Parquet file;
* ``sft`` — expert iteration: ``SFTTrainer`` on filtered collected rollouts;
* ``checkpoint``, ``lora``, ``throughput`` — a GGUF to a checkpoint, adapters merged
  into a model, seconds per GRPO step.

The library they drive, the other modules here (training/README.md lists every
module; the library never imports a script):

* ``grpo_trainer`` — ``MultiTurnGRPOTrainer``: TRL's GRPO over multi-turn episodes;
* ``lockstep`` — the one rollout loop (``play_lockstep``, ``LockstepRollout``), both layouts;
* ``packing`` — the two layouts: how a played episode becomes samples;
* ``starts`` — task starts, the rows of GRPO's dataset (no torch);
* ``transcripts`` — ``ChatFormat`` and ``tokenize_transcript``: transcripts as token ids (no torch);
* ``collection``, ``sft_data``, ``adapters`` — the library halves of ``collect``, ``sft``
  and ``lora`` (``adapters``: the ``--lora-rank`` / ``--adapter`` flags of every script);
* ``models`` — the model and tokenizer ``grpo`` and ``sft`` start from (``--model`` or
  ``--tiny``, ``--bf16``, adapters);
* ``envs`` — ``EnvOptions``, the environment flags every script shares, defaulting to
  the package's ``EnvSpec``;
* ``tiny`` — a tiny random model and a locally trained tokenizer (offline runs).

``vera_env`` never imports this package: the environment does not depend on torch.
"""
