"""Scripted turns shared by the training tests (a module, not conftest: importing
from ``conftest`` resolves to whichever conftest another test folder loaded first)."""

MOTIF = "seq.motif_count.easy.s0"
"""The builtin task the end-to-end GRPO runs script a correct member on."""

JUDGED_NODE = ("<command>wc -l < values.txt</command>\n"
               'NODE kind=load summary="values.txt holds 10 values" artifact=values.txt\n'
               'CHECK range "ten lines" :: test "$(wc -l < values.txt)" -eq 10 '
               "&& echo True || echo False")
"""A real node with a passing check on the judged task's data."""

TWO_TURN_RUN = ["--tiny", "--env-max-steps", "2", "--wrappers", "forced", "--reserve", "1",
                "--num-generations", "2", "--per-device-train-batch-size", "2",
                "--steps-per-generation", "1", "--learning-rate", "1e-2",
                "--max-turn-tokens", "8", "--env-workers", "2"]
"""``vera_env.training.scripts.grpo`` flags of a tiny two-turn run: groups of two, one update per batch."""


def answer_at_once(tasks) -> dict:
    """``StepScripted`` plans: member 0 of every group answers its task right at once."""
    return {task.question: {0: [(None, f"FINAL ANSWER: {task.answer}")]}
            for task in (tasks.get(t) for t in tasks.ids())}


def train_scripted(args, tasks, model, tokenizer, plans, *, model_tokens: int = 8, log=None):
    """Build ``vera_env.training.scripts.grpo``'s trainer for ``args`` (its phase lines to ``log``),
    script ``plans`` over the model's sampler (``StepScripted``; a two-turn run's first
    observation), train, close the rollout; returns the trainer."""
    from stepwise_sampler import StepScripted

    from vera_env.training.samplers import trainer_sampler
    from vera_env.training.scripts import grpo

    trainer, rollout = grpo.build_trainer(args, tasks, model, tokenizer, log=log)
    rollout._sampler_factory = lambda t: StepScripted(trainer_sampler(t), tokenizer, plans,
                                                      first="Steps left: 2.",
                                                      model_tokens=model_tokens)
    try:
        trainer.train()
    finally:
        rollout.close()
    return trainer
