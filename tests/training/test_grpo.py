"""GRPO in the concatenated layout (``--layout episode``) through the real env: two
optimizer steps of a tiny model, real sandbox and checks, the same loop and trainer as
the step-wise layout with the other packing.

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
from training_turns import JUDGED_NODE, MOTIF

from vera_env.policies import ScriptedPolicy
from vera_env.rollout import run_episode
from vera_env.training.envs import EnvOptions, make_env, task_source
from vera_env.training.samplers import trainer_sampler
from vera_env.training.scripts import grpo

GROUP = 4
BUDGET = 1600


@pytest.fixture(scope="module")
def run(tokenizer, motif_tasks, tmp_path_factory):
    from vera_env.training.tiny import tiny_model

    motif, judged_task, tasks = motif_tasks
    solution = [motif.solution[0], f"FINAL ANSWER: {motif.answer}"]
    plans = {motif.question: {0: solution, 1: ["\n" + solution[0]]},
             judged_task.question: {0: ["FINAL ANSWER: 42"], 1: [JUDGED_NODE]}}
    samplers: list[ScriptedTurns] = []

    def sampler(trainer):
        samplers.append(ScriptedTurns(trainer_sampler(trainer), tokenizer, plans))
        return samplers[-1]

    args = grpo.Args(tiny=True, layout="episode", output_dir=str(tmp_path_factory.mktemp("grpo")),
                     env_max_steps=3, wrappers=(), num_prompts=2, num_generations=GROUP,
                     per_device_train_batch_size=4, steps_per_generation=2, train_steps=2,
                     learning_rate=1e-2, max_completion_length=BUDGET, max_turn_tokens=384,
                     env_workers=4, save_final=False)
    model = tiny_model(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    trainer, rollout = grpo.build_trainer(args, tasks, model, tokenizer)
    rollout._sampler_factory = sampler  # the seam LockstepRollout exposes
    scored: list[tuple[list, list, dict]] = []
    score = trainer._generate_and_score_completions

    def keep(inputs):
        out = score(inputs)
        scored.append((trainer.last_episodes, trainer.last_samples, out))
        return out

    trainer._generate_and_score_completions = keep
    try:
        trainer.train()
    finally:
        rollout.close()
    return {"trainer": trainer, "before": before, "scored": scored, "tasks": tasks,
            "samplers": samplers, "model": model, "solution": solution}


def _groups(episodes):
    return [episodes[i:i + GROUP] for i in range(0, len(episodes), GROUP)]


def test_grpo_episode_layout_every_trainable_parameter_changed_and_loss_finite(run):
    after = dict(run["model"].named_parameters())
    unchanged = [n for n, p in run["before"].items() if torch.equal(p, after[n].detach())]
    assert unchanged == []
    losses = [h["loss"] for h in run["trainer"].state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(float(x)) for x in losses)


def test_grpo_episode_layout_groups_share_one_task_start(run):
    ((episodes, _, _),) = run["scored"]
    assert len(episodes) == 2 * GROUP
    for group in _groups(episodes):
        assert len({e.start for e in group}) == 1
    assert {g[0].start.task_id for g in _groups(episodes)} == {MOTIF, "judged.values"}


def test_grpo_episode_layout_rewards_logged_are_the_envs(run):
    ((episodes, _, _),) = run["scored"]
    oracle = next(e for e in episodes if e.start.task_id == MOTIF and e.attempt.correct)
    # The same turns through a plain env score the same: the reward is the harness's.
    replay = run_episode(make_env(run["tasks"], EnvOptions(env_max_steps=3, wrappers=())),
                         ScriptedPolicy(run["solution"]), task_id=MOTIF)
    assert replay.correct and oracle.attempt.score == pytest.approx(replay.score)
    assert oracle.fields()["verification"] == pytest.approx(replay.verification_reward)
    scorable = [e.fields() for e in episodes if not e.excluded]
    logged = run["trainer"].state.log_history[0]
    for name, value in [("verification_reward", lambda f: f["verification"]),
                        ("correctness_reward", lambda f: f["correctness"] or 0.0),
                        ("format_reward", lambda f: -f["format_penalty"])]:
        expected = sum(value(f) for f in scorable) / len(scorable)
        assert logged[f"rewards/{name}/mean"] == pytest.approx(expected, abs=1e-6)
    judged_node = next(e for e in episodes if e.turns and e.turns[0].action == JUDGED_NODE)
    assert judged_node.fields()["verification"] == 0  # an llm-graded task pays no checks
    assert oracle.fields()["verification"] > 0  # a real check ran in the sandbox


def test_grpo_episode_layout_unscorable_episode_gets_no_sample_and_no_baseline_share(run):
    ((episodes, samples, out),) = run["scored"]
    bad = [i for i, e in enumerate(episodes) if e.excluded]
    assert len(bad) == 1 and [t.action for t in episodes[bad[0]].turns] == ["FINAL ANSWER: 42"]
    assert len(samples) == len(episodes) - 1  # one sample per scorable episode, none for it
    group = bad[0] // GROUP * GROUP
    kept = [i for i in range(len(episodes)) if i != bad[0]]
    others = [samples[kept.index(i)].advantage for i in range(group, group + GROUP)
              if i != bad[0]]
    assert sum(others) == pytest.approx(0.0, abs=1e-4)  # baseline over the scorable three
    assert any(abs(a) > 0.1 for a in others)
    assert out["advantages"][:len(samples)].tolist() == pytest.approx(
        [s.advantage for s in samples])  # one episode, one sample: weight 1
    assert any(e.out_of_tokens for e in episodes)  # the token budget ended some episodes


def test_grpo_episode_layout_mask_zeroes_observations_and_keeps_sampled_ids(run, tokenizer):
    ((episodes, samples, out),) = run["scored"]
    kept = [e for e in episodes if not e.excluded]
    for row, (episode, sample) in enumerate(zip(kept, samples, strict=True)):
        n = len(sample.completion_ids)
        assert n <= BUDGET and sample.completion_ids[-1] == tokenizer.eos_token_id
        assert out["tool_mask"][row, :n].tolist() == sample.mask
        masked = tokenizer.decode([t for t, m in zip(sample.completion_ids, sample.mask,
                                                     strict=True) if not m])
        trained = tokenizer.decode([t for t, m in zip(sample.completion_ids, sample.mask,
                                                      strict=True) if m],
                                   skip_special_tokens=True)
        for turn in episode.turns[1:]:
            assert turn.observation in masked and turn.observation not in trained
        assert masked.count(ASSISTANT) == len(episode.turns) - 1
    first = run["samplers"][0].scripted_ids[0]
    oracle = next(s for e, s in zip(kept, samples, strict=True)
                  if e.start.task_id == MOTIF and e.attempt.correct)
    assert oracle.completion_ids[:len(first)] == first and all(oracle.mask[:len(first)])


def test_task_source_draws_fresh_seeds_from_every_named_source():
    for name in ("builtin", "real", "perturbed", "canary"):
        ids = list(task_source(name, ("easy",), 3).ids())
        seeds = {int(re.search(r"\.s(\d+)", tid).group(1)) for tid in ids}
        assert seeds == {0, 1, 2}, (name, sorted(seeds))
