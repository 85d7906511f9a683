"""``--reward-weights``: parsed and refused at the command line, applied to advantages,
and logged beside the env's own reward; one tiny LoRA GRPO run on verification and
format alone (``vera_env.training.adapters``) that changes the adapter and nothing else."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch
from training_turns import TWO_TURN_RUN, answer_at_once

from vera_env.training.advantages import group_advantages, weighted_rewards
from vera_env.training.arguments import parse_args
from vera_env.training.phase_log import PhaseLog
from vera_env.training.scripts import grpo

# One group of four episodes: (verification, correctness, format) per episode. Members 0
# and 1 verify and format alike and differ only in correctness; so do 2 and 3.
GROUP = [[0.5, 1.0, -0.1], [0.5, 0.0, -0.1], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_weights_one_zero_one_advantages_ignore_correctness():
    adv, zero_std = group_advantages(weighted_rewards(GROUP, (1, 0, 1)).tolist(), 4)
    assert adv[0] == pytest.approx(adv[1]) and adv[2] == pytest.approx(adv[3])
    assert adv[0] > 0 > adv[2] and not zero_std.any()
    flipped = [[v, 1.0 - c, f] for v, c, f in GROUP]  # other correctness, same advantages
    assert group_advantages(weighted_rewards(flipped, (1, 0, 1)).tolist(), 4)[0] == \
        pytest.approx(adv)
    default = group_advantages(weighted_rewards(GROUP, (1, 1, 1)).tolist(), 4)[0]
    assert default[0] != pytest.approx(default[1])  # the env's reward does see it


def test_weights_group_differing_only_in_correctness_has_no_advantage():
    group = [[0.25, 1.0, 0.0], [0.25, 0.0, 0.0]]
    adv, zero_std = group_advantages(weighted_rewards(group, (1, 0, 1)).tolist(), 2)
    assert zero_std.all() and np.allclose(adv, 0.0)


def test_weighted_rewards_unscorable_episode_stays_nan():
    out = weighted_rewards([[math.nan] * 3, [0.5, math.nan, -0.25]], (1, 0, 1))
    assert math.isnan(out[0]) and out[1] == pytest.approx(0.25)


def test_parse_args_reward_weights_reach_the_grpo_config():
    args = parse_args(grpo.Args, ["--tiny", "--reward-weights", "1", "0", "1"])
    assert args.reward_weights == (1.0, 0.0, 1.0)
    assert grpo.grpo_config(args).reward_weights == [1.0, 0.0, 1.0]
    assert parse_args(grpo.Args, ["--tiny"]).reward_weights == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(("values", "message"), [
    (["1", "0"], "expected 3 arguments"),
    (["1", "0", "1", "1"], "unrecognized arguments"),
    (["1", "-0.5", "1"], "must be >= 0"),
    (["0", "0", "0"], "all zero"),
    (["1", "x", "1"], "invalid float value"),
])
def test_parse_args_bad_reward_weights_exit_saying_why(values, message, capsys):
    with pytest.raises(SystemExit):
        parse_args(grpo.Args, ["--tiny", "--reward-weights", *values])
    assert message in capsys.readouterr().err


def test_parse_args_lora_with_beta_exits_naming_the_reference_model(capsys):
    with pytest.raises(SystemExit):
        parse_args(grpo.Args, ["--tiny", "--lora-rank", "4", "--beta", "0.1"])
    assert "--beta > 0 with --lora-rank" in capsys.readouterr().err


@pytest.fixture(scope="module")
def lora_run(tokenizer, tmp_path_factory):
    """Two GRPO steps of a rank-4 adapter on the tiny model, verification and format only:
    member 0 of each group answers right at once (correctness 1, verification 0), the
    model's members pay format penalties."""
    from stepwise_sampler import StepScripted

    from vera_env.tasks import TaskSource
    from vera_env.tasks.builtin import make_task
    from vera_env.training.adapters import add_lora
    from vera_env.training.resume import CURVE, fit
    from vera_env.training.samplers import trainer_sampler
    from vera_env.training.tiny import tiny_model

    tasks = TaskSource([make_task("seq.motif_count.easy.s0")])
    folder = tmp_path_factory.mktemp("lora_grpo")
    args = parse_args(grpo.Args, [*TWO_TURN_RUN, "--num-prompts", "2", "--train-steps", "2",
                                  "--lora-rank", "4", "--reward-weights", "1", "0", "1",
                                  "--output-dir", str(folder), "--no-save-final"])
    model = tiny_model(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model = add_lora(model, args)
    adapter = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    lines = io.StringIO()
    trainer, rollout = grpo.build_trainer(args, tasks, model, tokenizer,
                                          log=PhaseLog("grpo", stream=lines))
    rollout._sampler_factory = lambda t: StepScripted(trainer_sampler(t), tokenizer,
                                                      answer_at_once(tasks),
                                                      first="Steps left: 2.", model_tokens=8)
    try:
        fit(trainer, folder, resume=False)
    finally:
        rollout.close()
    curve = [json.loads(line) for line in (folder / CURVE).read_text().splitlines()]
    return {"trainer": trainer, "model": model, "before": before, "adapter": adapter,
            "curve": curve, "phases": lines.getvalue()}


def test_lora_grpo_changes_the_adapter_and_leaves_the_base_frozen(lora_run):
    model = lora_run["model"]
    params = dict(model.named_parameters())
    assert lora_run["adapter"] and all("lora_" in n for n in lora_run["adapter"])
    changed = [n for n, p in lora_run["adapter"].items() if not torch.equal(p, params[n].detach())]
    assert changed and all("lora_" in n for n in changed)
    base = model.get_base_model()
    for name, value in base.named_parameters():
        if "lora_" in name:
            continue
        original = lora_run["before"][name.replace(".base_layer", "")]
        assert torch.equal(value.detach(), original), name
    losses = [h["loss"] for h in lora_run["trainer"].state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(float(x)) for x in losses)


def test_grpo_curve_logs_the_default_reward_beside_the_weighted_one(lora_run):
    logged = [r for r in lora_run["curve"] if "reward" in r]
    assert len(logged) == 2
    for row in logged:
        ver, cor, fmt = (row[f"rewards/{n}/mean"] for n in
                         ("verification_reward", "correctness_reward", "format_reward"))
        assert row["reward"] == pytest.approx(ver + fmt, abs=1e-5)
        assert row["reward_default"] == pytest.approx(ver + cor + fmt, abs=1e-5)
        assert cor > 0  # member 0 answered right: the default reward differs from the weighted
        assert "rewards/verification_reward/std" in row and "frac_reward_zero_std" in row


def test_grpo_phase_line_names_the_default_reward_when_weights_differ(lora_run):
    steps = [line for line in lora_run["phases"].splitlines() if "optimizer step done" in line]
    assert len(steps) == 2 and all("default reward" in line for line in steps)
