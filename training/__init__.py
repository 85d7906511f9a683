"""Training on the verification reward with TRL (needs the ``training`` extra).

* ``vera_env.training.grpo`` — GRPO through the environment (``GRPOTrainer(rollout_func=...)``);
* ``vera_env.training.collect`` — rollouts of any policy to a datasets-loadable JSONL/Parquet file;
* ``vera_env.training.sft`` — expert iteration: ``SFTTrainer`` on filtered collected rollouts;
* ``vera_env.training.episodes`` — episodes as token ids with an observation mask (no torch);
* ``vera_env.training.tiny`` — a tiny random model and a locally trained tokenizer (offline runs).

``vera_env`` never imports this package: the environment does not depend on torch.
"""
