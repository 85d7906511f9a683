"""Step-wise GRPO end to end: ``vera_env.training.scripts.grpo.main`` with ``--env-max-steps 12`` and a dump.

One run (module fixture) of a tiny random model through the real env and sandbox, on
two task starts with four episodes each; some members are scripted so that the run
also goes through a real command, a verified node, a correct answer and an unscorable
grade, and groups get different rewards:

* a builtin motif-count task: member 0 plays the reference solution's first turn and
  then the right answer; member 1 runs one command, then the model plays;
* a task graded by an LLM judge that is not configured: member 0 answers at once,
  member 1 declares a node with a passing check, then the model plays; every answer
  there is unscorable, so the whole group is excluded from vera_env.training.

Model-played members take the 9 free steps, then answer in the forced phase (the last 3
of 12 steps are forced): 10 to 12 turns each. Everything below is read back
from ``--dump-rollouts`` and the trainer.
"""

from __future__ import annotations

import io
import itertools
import json
import math
from collections import defaultdict

import pytest
import torch
from stepwise_sampler import StepScripted
from training_turns import JUDGED_NODE, MOTIF

from vera_env.policies.chat import prompt_text
from vera_env.training.arguments import parse_args
from vera_env.training.phase_log import PhaseLog
from vera_env.training.samplers import trainer_sampler
from vera_env.training.scripts import grpo

GROUP = 4
MAX_STEPS = 12


@pytest.fixture(scope="module")
def run(tokenizer, motif_tasks, tmp_path_factory):
    from vera_env.training.lockstep import LockstepRollout
    from vera_env.training.tiny import tiny_model

    motif, judged_task, tasks = motif_tasks
    node_summary = motif.solution[0].split('summary="')[1].split('"')[0]
    plans = {motif.question: {0: [(None, motif.solution[0]),
                                  (node_summary, f"FINAL ANSWER: {motif.answer}")],
                              1: [(None, "<command>echo member-one</command>")]},
             judged_task.question: {0: [(None, "FINAL ANSWER: 42")],
                                    1: [(None, JUDGED_NODE)]}}
    folder = tmp_path_factory.mktemp("stepwise")
    args = parse_args(grpo.Args, [
        "--tiny", "--env-max-steps", str(MAX_STEPS), "--wrappers", "forced",
        "--num-prompts", "2", "--num-generations", str(GROUP),
        "--per-device-train-batch-size", "4", "--steps-per-generation", "2",
        "--train-steps", "2", "--learning-rate", "1e-2", "--max-turn-tokens", "256",
        "--output-dir", str(folder), "--dump-rollouts", str(folder / "dump.jsonl"),
        "--no-save-final"])
    model, tok = tiny_model(tokenizer), tokenizer
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    lines = io.StringIO()
    ticks = itertools.count(step=10.0)  # ten seconds a reading: every round line is written
    log = PhaseLog("grpo", stream=lines, clock=lambda: next(ticks))
    trainer, rollout = grpo.build_trainer(args, tasks, model, tok, log=log)
    assert isinstance(rollout, LockstepRollout)
    rollout._sampler_factory = lambda t: StepScripted(  # the seam LockstepRollout exposes
        trainer_sampler(t), tok, plans, first=f"Steps left: {MAX_STEPS}.")
    try:
        trainer.train()
    finally:
        rollout.close()
    records = [json.loads(line) for line in (folder / "dump.jsonl").read_text().splitlines()]
    return {"trainer": trainer, "records": records, "before": before, "model": model,
            "tokenizer": tok, "motif": motif,
            "phases": [line.split("] ", 1)[1] for line in lines.getvalue().splitlines()]}


def _episodes(records):
    episodes = defaultdict(list)
    for record in records:
        episodes[record["episode"]].append(record)
    return episodes


def test_stepwise_every_prompt_is_exactly_its_observation(run):
    records, tok = run["records"], run["tokenizer"]
    assert len(records) > 2 * GROUP
    for record in records:
        # The whole prompt is the evaluation policy's prompt for this observation:
        # no earlier turn, no transcript, the prefill at the end.
        assert record["prompt"] == prompt_text(tok, record["observation"],
                                               prefill=record["prefill"])
        assert record["prompt"].count(record["observation"]) == 1
    forced = [r for r in records if r["prefill"]]
    assert forced and all(r["prompt"].endswith("<|im_start|>assistant\nFINAL ANSWER: ")
                          for r in forced)


def test_stepwise_prompt_length_bounded_by_the_observation_not_the_turn(run):
    episodes = _episodes(run["records"])
    # Model-played episodes run into the forced phase (a random model's forced reply may
    # be refused, e.g. for an invisible character, so some take more than one forced turn).
    free = MAX_STEPS - 3
    long = [turns for turns in episodes.values() if len(turns) > free]
    assert len(long) >= 3, "model-played episodes run into the forced phase"
    for turns in long:
        assert [r["turn"] for r in turns] == list(range(len(turns)))
        assert all(r["prefill"] for r in turns[free:])
        assert not any(r["prefill"] for r in turns[:free])
        first = turns[0]["prompt_tokens"]
        # Later observations add a nudge or a forced instruction, never the transcript.
        assert max(r["prompt_tokens"] for r in turns) < first + 350
        completions = sum(r["completion_tokens"] for r in turns[:-1])
        assert turns[-1]["prompt_tokens"] < first + completions / 2


def test_stepwise_episode_shares_advantage_and_group_shares_task(run):
    episodes = _episodes(run["records"])
    groups = defaultdict(set)
    for turns in episodes.values():
        assert len({r["advantage"] for r in turns}) == 1
        assert len({r["weight"] for r in turns}) == 1
        groups[turns[0]["group"]].add((turns[0]["task_id"], turns[0]["seed"]))
    assert len(groups) == 2  # one generation batch: two task starts
    assert all(len(starts) == 1 for starts in groups.values())
    trained = [t for t in episodes.values() if t[0]["trained"]]
    total = {round(sum(r["weight"] for r in t), 6) for t in trained}
    assert len(total) == 1  # every episode weighs the same, 2 turns or 10


def test_stepwise_unscorable_episode_gets_no_gradient_or_baseline_share(run):
    # No judge is configured, so every answer to the judged task is unscorable: member 0
    # at once, the others at their forced answer. None of them may move the policy.
    episodes = _episodes(run["records"])
    bad = [t for t in episodes.values() if not t[0]["trained"]]
    assert len(bad) == GROUP and {t[0]["task_id"] for t in bad} == {"judged.values"}
    assert all(r["advantage"] is None for t in bad for r in t)
    assert any(t[0]["completion"].startswith("FINAL ANSWER: 42") for t in bad)
    trained = [t for t in episodes.values() if t[0]["trained"]]
    assert len(trained) == GROUP and {t[0]["task_id"] for t in trained} == {MOTIF}
    assert sum(t[0]["advantage"] for t in trained) == pytest.approx(0.0, abs=1e-4)
    first = next(h for h in run["trainer"].state.log_history if "loss" in h)
    assert first["stepwise/excluded_episodes"] == GROUP
    assert first["stepwise/samples"] == sum(len(t) for t in trained)


def test_stepwise_real_checks_and_answers_reach_the_reward(run):
    records = run["records"]
    correct = [r for r in records if r["reward_parts"]["correctness"] == 1.0]
    assert correct and all(r["task_id"] == MOTIF for r in correct)
    verified = [r for r in records if r["reward_parts"]["verification"] > 0]
    assert {r["task_id"] for r in verified} == {MOTIF}  # an llm-graded task pays no checks
    winner = next(t for t in _episodes(records).values() if t[-1] in correct)
    assert winner[0]["advantage"] > 0.5


def test_stepwise_parameters_changed_and_metrics_logged(run):
    after = dict(run["model"].named_parameters())
    unchanged = [n for n, p in run["before"].items() if torch.equal(p, after[n].detach())]
    assert unchanged == []
    logs = [h for h in run["trainer"].state.log_history if "loss" in h]
    assert len(logs) == 2 and all(math.isfinite(float(h["loss"])) for h in logs)
    first = logs[0]
    assert 0 < first["env/format_error_rate"] <= 1
    # What the reward functions log reaches the logs (TRL's own flush is in the method
    # the step-wise trainer replaces): half the episodes are unscorable, and of the
    # scorable motif group only member 0 answers right.
    assert first["env/unscorable"] == pytest.approx(0.5)
    assert first["env/correct"] == pytest.approx(0.25)
    assert run["trainer"]._pending_metrics == {}
    assert 0 <= first["frac_reward_zero_std"] < 1


def test_stepwise_rollout_rounds_and_steps_announce_themselves_in_order(run):
    """A CPU rollout is minutes of rounds before TRL's bar moves: each phase says so."""
    phases = run["phases"]
    batch = [p for p in phases if p.startswith("steps 1-2/2:")]
    assert batch[0] == "steps 1-2/2: rolling out 8 episodes"
    assert batch[1].startswith("steps 1-2/2: rolled out 8 episodes in ")
    assert batch[1].endswith("excluded); computing the loss")
    first, done = phases.index(batch[0]), phases.index(batch[1])
    assert phases[:first] == ["training: 2 optimizer steps"]
    assert phases[first + 1] == "starting 7 more environments (8 in all, one per episode)"
    rounds = phases[first + 2: done]
    assert rounds[0] == "rollout round 1: 8 of 8 episodes sampling a turn"
    assert [r.split(":")[0] for r in rounds] == [f"rollout round {k}"
                                                 for k in range(1, len(rounds) + 1)]
    assert len(rounds) == 1 + max(r["turn"] for r in run["records"])  # the longest episode
    assert [p.split(" (")[0] for p in phases[done + 1:]] == [
        "step 1/2: optimizer step done", "step 2/2: optimizer step done"]
