"""Training on the verification reward with TRL (needs the ``training`` extra).

* ``training.grpo`` — GRPO through the environment (``GRPOTrainer(rollout_func=...)``);
* ``training.collect`` — rollouts of any policy to a datasets-loadable JSONL/Parquet file;
* ``training.sft`` — expert iteration: ``SFTTrainer`` on filtered collected rollouts;
* ``training.episodes`` — episodes as token ids with an observation mask (no torch);
* ``training.tiny`` — a tiny random model and a locally trained tokenizer (offline runs).

``vera_env`` never imports this package: the environment does not depend on torch.
"""
