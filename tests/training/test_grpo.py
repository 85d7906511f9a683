"""GRPO in the concatenated layout (``--layout episode``) through the real env: two
optimizer steps of a tiny model, real sandbox and checks.

One run (module fixture) on two task starts, four episodes each:

* a builtin motif-count task: member 0 plays the reference solution's first turn (a real
  command and node, real checks) and then the right answer, member 1 plays that first
  turn with a leading blank line and then the model, members 2-3 are the model;
* a task graded by an LLM judge that is not configured: member 0 answers at once
  (unscorable), member 1 declares a node with a passing check, members 2-3 are the model.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from scripted_sampler import ASSISTANT, ScriptedTurns
from training_turns import JUDGED_NODE

from policies import ScriptedPolicy
from training.envs import make_env, task_source
from training.grpo import (
    REWARD_FUNCS,
    Args,
    VeraRollout,
    build_dataset,
    grpo_config,
)
from training.samplers import trainer_sampler
from vera_env.rollout import run_episode
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import make_task

MOTIF = "seq.motif_count.easy.s0"
GROUP = 4


@pytest.fixture(scope="module")
def run(tokenizer, judged_task, tmp_path_factory):
    from trl import GRPOTrainer

    from training.tiny import tiny_model

    motif = make_task(MOTIF)
    tasks = TaskSource([motif, judged_task])
    solution = [motif.solution[0], f"FINAL ANSWER: {motif.answer}"]
    plans = {motif.question: {0: solution, 1: ["\n" + solution[0]]},
             judged_task.question: {0: ["FINAL ANSWER: 42"], 1: [JUDGED_NODE]}}
    samplers: list[ScriptedTurns] = []

    def sampler(trainer):
        samplers.append(ScriptedTurns(trainer_sampler(trainer), tokenizer, plans))
        return samplers[-1]

    rollout = VeraRollout(tasks, max_steps=3, wrappers=(), max_turn_tokens=384,
                          env_workers=4, sampler=sampler)
    args = Args(tiny=True, layout="episode", output_dir=str(tmp_path_factory.mktemp("grpo")),
                num_generations=GROUP, per_device_train_batch_size=4,
                steps_per_generation=2, train_steps=2, learning_rate=1e-2,
                max_completion_length=1600, temperature=1.0)
    model = tiny_model(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    trainer = GRPOTrainer(model=model, reward_funcs=REWARD_FUNCS, args=grpo_config(args),
                          train_dataset=build_dataset(tasks, 2, seed=0),
                          processing_class=tokenizer, rollout_func=rollout)
    scored: list[dict] = []
    score = trainer._generate_and_score_completions  # TRL internal: the advantages

    def keep(inputs):
        out = score(inputs)
        scored.append(out)
        return out

    trainer._generate_and_score_completions = keep
    trainer.train()
    rollout.close()
    return {"trainer": trainer, "episodes": rollout.last_episodes, "before": before,
            "scored": scored, "tasks": tasks, "samplers": samplers, "model": model,
            "solution": solution}


def _groups(episodes):
    return [episodes[i:i + GROUP] for i in range(0, len(episodes), GROUP)]


def test_grpo_every_trainable_parameter_changed_and_loss_finite(run):
    after = dict(run["model"].named_parameters())
    unchanged = [n for n, p in run["before"].items() if torch.equal(p, after[n].detach())]
    assert unchanged == []
    losses = [h["loss"] for h in run["trainer"].state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(float(x)) for x in losses)


def test_grpo_groups_share_one_task_start(run):
    episodes = run["episodes"]
    assert len(episodes) == 2 * GROUP
    for group in _groups(episodes):
        assert len({e.start for e in group}) == 1
    assert {g[0].start.task_id for g in _groups(episodes)} == {MOTIF, "judged.values"}


def test_grpo_rewards_logged_are_the_envs(run):
    episodes = run["episodes"]
    oracle = next(e for e in episodes if e.start.task_id == MOTIF and e.correct)
    # The same turns through a plain env score the same: the reward is the harness's.
    replay = run_episode(make_env(run["tasks"], max_steps=3, wrappers=()),
                         ScriptedPolicy(run["solution"]), task_id=MOTIF)
    assert oracle.verification == pytest.approx(replay.verification_reward) and replay.correct
    assert oracle.env_reward == pytest.approx(replay.score)
    scorable = [e for e in episodes if not e.unscorable]
    logged = run["trainer"].state.log_history[0]
    for name, value in [("verification_reward", lambda e: e.verification),
                        ("correctness_reward", lambda e: e.correctness or 0.0),
                        ("format_reward", lambda e: -e.penalty)]:
        expected = sum(value(e) for e in scorable) / len(scorable)
        assert logged[f"rewards/{name}/mean"] == pytest.approx(expected, abs=1e-6)
    assert logged["reward"] == pytest.approx(
        sum(e.env_reward for e in scorable) / len(scorable), abs=1e-6)
    judged_node = next(e for e in episodes if e.actions and e.actions[0] == JUDGED_NODE)
    assert judged_node.verification > 0  # a real check ran and passed in the sandbox


def test_grpo_unscorable_episode_gets_no_advantage_and_no_baseline_share(run):
    episodes = run["episodes"]
    (out,) = run["scored"]
    advantages = out["advantages"].tolist()
    bad = [i for i, e in enumerate(episodes) if e.unscorable]
    assert len(bad) == 1 and episodes[bad[0]].actions == ["FINAL ANSWER: 42"]
    for func in REWARD_FUNCS:
        rows = func(completions=[""] * len(episodes),
                    **{k: [getattr(e, a) for e in episodes] for k, a in
                       [("verification", "verification"), ("correctness", "correctness"),
                        ("unscorable", "unscorable"), ("correct", "correct"),
                        ("out_of_tokens", "out_of_tokens"), ("format_penalty", "penalty")]})
        assert rows[bad[0]] is None and all(r is not None for i, r in enumerate(rows)
                                            if i != bad[0])
    assert advantages[bad[0]] == 0.0
    group = bad[0] // GROUP * GROUP
    others = [advantages[i] for i in range(group, group + GROUP) if i != bad[0]]
    assert sum(others) == pytest.approx(0.0, abs=1e-4)  # baseline over the scorable three
    assert any(abs(a) > 0.1 for a in others)
    assert any(e.out_of_tokens for e in episodes)  # the token budget ended some episodes


def test_grpo_env_mask_zeroes_observations_and_keeps_sampled_ids(run, tokenizer):
    episodes = run["episodes"]
    (out,) = run["scored"]
    for row, episode in enumerate(episodes):
        n = len(episode.completion_ids)
        assert n <= 1600 and episode.completion_ids[-1] == tokenizer.eos_token_id
        assert out["tool_mask"][row, :n].tolist() == episode.env_mask
        masked = tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask, strict=False)
                                   if not m])
        trained = tokenizer.decode([t for t, m in zip(episode.completion_ids, episode.env_mask, strict=False)
                                    if m], skip_special_tokens=True)
        for obs in episode.observations[1:]:
            assert obs in masked and obs not in trained
        assert masked.count(ASSISTANT) == len(episode.observations) - 1
    scripted = run["samplers"][0].scripted_ids
    oracle = next(e for e in episodes if e.start.task_id == MOTIF and e.correct)
    first = scripted[0]
    assert oracle.completion_ids[:len(first)] == first and all(oracle.env_mask[:len(first)])


def test_task_source_draws_fresh_seeds_from_every_named_source():
    for name in ("builtin", "real", "perturbed", "canary"):
        ids = list(task_source(name, ("easy",), 3).ids())
        seeds = {int(re.search(r"\.s(\d+)", tid).group(1)) for tid in ids}
        assert seeds == {0, 1, 2}, (name, sorted(seeds))
