"""What a trainer watches: format-error rate, mean return and canaries answered right.

Episodes are played by scripted policies through the real environment and sandbox, so
the rejected turns and the rewards are the environment's, not made up in the test.
"""

from __future__ import annotations

import pytest

from vera_env.evaluation.metrics import format_summary, summarise, summary_rows, turn_metrics
from vera_env.evaluation.summary import TurnMetrics
from vera_env.policy import ScriptedPolicy
from vera_env.rollout import Attempt, run_episode
from vera_env.spec import EnvSpec
from vera_env.tasks import TaskSource, load_tasks
from vera_env.tasks.canary import make_canary_task
from vera_env.tasks.real import real_id

BUILTIN = load_tasks("builtin")
FIRST, SECOND = BUILTIN.ids()[:2]
GARBAGE = "I think the answer is probably 42."  # no block: the env rejects the turn


def _play(source: TaskSource, scripts: dict[str, tuple[str, ...]], *,
          max_steps: int = 12) -> list[Attempt]:
    env = EnvSpec(max_steps=max_steps, wrappers=()).build(tasks=source)
    policy = ScriptedPolicy(scripts)
    try:
        return [run_episode(env, policy, task_id=tid) for tid in scripts]
    finally:
        env.close()


def test_turn_metrics_scripted_episodes_count_rejected_turns_and_mean_return() -> None:
    clean = tuple(BUILTIN.get(FIRST).solution)
    sloppy = (GARBAGE, GARBAGE, *BUILTIN.get(SECOND).solution)
    attempts = _play(BUILTIN, {FIRST: clean, SECOND: sloppy})
    assert [a.correct for a in attempts] == [True, True]
    assert [bool(s.error) for s in attempts[1].steps[:2]] == [True, True]
    summary = summarise(attempts, k=1)
    turns = len(attempts[0].steps) + len(attempts[1].steps)
    assert (summary.turns.turns, summary.turns.rejected_turns) == (turns, 2)
    assert summary.turns.format_error_rate == pytest.approx(2 / turns)
    returns = [sum(s.reward for s in a.steps) for a in attempts]
    assert summary.turns.mean_return == pytest.approx(sum(returns) / 2)
    # The two rejected free turns cost the sloppy episode two format penalties.
    assert returns[1] == pytest.approx(attempts[1].verification_reward + 1.0 - 2 * 0.02)
    rows = dict(summary_rows(summary))
    assert rows["format errors (rejected turns)"] == \
        f"{100 * 2 / turns:.1f}% (2 of {turns} turns)"
    assert rows["mean return (episode reward)"] == f"{sum(returns) / 2:.3f}"


def test_turn_metrics_without_canaries_show_a_dash() -> None:
    attempts = _play(BUILTIN, {FIRST: tuple(BUILTIN.get(FIRST).solution)})
    summary = summarise(attempts, k=1)
    assert summary.canaries.right_rate is None
    assert dict(summary_rows(summary))["canaries answered undetermined"] == "—"


def test_turn_metrics_canaries_right_only_when_answered_cannot_be_determined() -> None:
    honest_id, guess_id = real_id("csv.lung_median") + "+absent", \
        real_id("csv.lung_median") + "+na_column"
    honest, guess = make_canary_task(honest_id), make_canary_task(guess_id)
    source = TaskSource([honest, guess], name="canaries")
    assert guess.trap is not None
    attempts = _play(source, {honest_id: tuple(honest.solution),
                              guess_id: tuple(guess.trap.careless_solution)})
    assert [a.correct for a in attempts] == [True, False]
    summary = summarise(attempts, k=1)
    assert summary.canaries.right_rate == 0.5 and summary.canaries.attempts == 2
    assert dict(summary_rows(summary))["canaries answered undetermined"] == \
        "50.0% of 2 canary attempts"
    assert "canaries answered undetermined" in format_summary(summary)


def test_turn_metrics_no_turns_and_no_scores_give_none() -> None:
    excluded = Attempt(task_id="t", status="provider", error="down")
    assert turn_metrics([excluded]) == TurnMetrics(turns=0, rejected_turns=0,
                                                   format_error_rate=None, mean_return=None)
    assert summarise([excluded], k=1).to_dict()["canary_right_rate"] is None
