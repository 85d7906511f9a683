"""Summary metrics and the run folder: pass@k, consistency, exclusions, torn lines."""

from __future__ import annotations

import math

import pytest

from vera_env.evaluation.metrics import format_summary, latest_attempts, pass_at_k, summarise
from vera_env.evaluation.rundir import RunDir, RunSettings, RunSettingsMismatch, append
from vera_env.rollout import Attempt
from vera_env.spec import EnvSpec, JudgeEndpoint
from vera_env.verification.rewards import RewardConfig


def att(task, k, status="ok", correct=True, **kw):
    answered = status == "ok"
    return Attempt(task_id=task, attempt_index=k, status=status,
                   correct=correct if answered else None, answer="x" if answered else "", **kw)


@pytest.mark.parametrize("n, c, k, expected", [
    (5, 0, 1, 0.0), (5, 5, 5, 1.0), (5, 1, 1, 0.2), (5, 1, 5, 1.0), (5, 2, 2, 1 - 3 / 10),
    (10, 3, 4, 1 - math.comb(7, 4) / math.comb(10, 4))])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_impossible_arguments():
    with pytest.raises(ValueError, match="k must be"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="c must be"):
        pass_at_k(3, 4, 1)


def test_summary_excludes_provider_and_sandbox_and_counts_no_answer_as_wrong():
    attempts = ([att("a", k) for k in range(5)]                                   # 5/5
                + [att("b", k, correct=k < 4) for k in range(5)]                  # 4/5
                + [att("c", 0), att("c", 1, "max_steps"), att("c", 2, "format"),
                   att("c", 3, correct=False), att("c", 4, "provider")]           # 1/4 scored
                + [att("d", k, "sandbox", unscorable=True) for k in range(5)])    # excluded
    s = summarise(attempts, k=5)
    assert (s.scored, s.excluded, s.correct) == (14, 6, 10)
    assert s.accuracy.rate == pytest.approx(10 / 14)
    assert s.no_answer_share == pytest.approx(2 / 14)
    assert s.pass_at.at_1 == pytest.approx((1 + 0.8 + 0.25) / 3)
    assert s.pass_at.at_k == 1.0 and s.pass_at.tasks_at_k == 2     # c has 4 scored: not eligible
    assert s.consistency.rate == 1.0 and s.consistency.tasks == 2  # a (5/5) and b (4/5)
    assert s.statuses["sandbox"] == 5 and s.statuses["provider"] == 1
    assert s.per_task["c"].outcomes[1:3] == ("no-answer", "no-answer")
    assert s.to_dict()["pass@5"] == 1.0 and s.to_dict()["pass@k_tasks"] == 2
    assert "consistency (right in >= 4 of 5)" in format_summary(s)


def test_consistency_needs_four_of_five():
    s = summarise([att("a", k, correct=k < 3) for k in range(5)], k=5)
    assert s.consistency.rate == 0.0 and s.pass_at.at_1 == pytest.approx(0.6)


def test_unscorable_grade_is_an_exclusion_and_tokens_sum():
    s = summarise([att("a", 0, correct=None, prompt_tokens=10, completion_tokens=3),
                   att("a", 1, prompt_tokens=5, completion_tokens=1)], k=2)
    assert s.excluded == 1 and s.unscorable == 1 and s.accuracy.rate == 1.0
    assert (s.tokens_in, s.tokens_out) == (15, 4)


def test_latest_attempt_per_key_wins():
    first, second = att("a", 0, correct=False), att("a", 0, correct=True)
    assert latest_attempts([first, second]) == [second]


def settings(**kw):
    base = dict(policy="openai", model="m", task_ids=("a",), attempts=1, seed=0,
                temperature=0.0, max_tokens=64,
                env=EnvSpec(tasks="builtin", max_steps=10, wrappers=("forced",), reserve=3))
    return RunSettings(**{**base, **kw})


def test_torn_last_line_is_ignored_and_cut_before_appending(tmp_path):
    run = RunDir(tmp_path)
    run.start(settings(), resume=False)
    with run.open_results() as handle:
        append(handle, att("a", 0))
    with run.results_path.open("a") as handle:
        handle.write(att("a", 1).to_json()[:40])          # killed mid-write
    assert [a.attempt_index for a in run.attempts()] == [0]
    with run.open_results() as handle:
        append(handle, att("a", 1))
    assert [a.attempt_index for a in run.attempts()] == [0, 1]
    assert run.results_path.read_text().count("\n") == 2


def test_corrupt_middle_line_is_an_error(tmp_path):
    run = RunDir(tmp_path)
    run.results_path.write_text("garbage\n" + att("a", 0).to_json() + "\n")
    with pytest.raises(ValueError, match=r"results.jsonl:1: not an Attempt"):
        run.attempts()


def test_resume_checks_binding_settings_only(tmp_path):
    run = RunDir(tmp_path / "r")
    run.start(settings(base_url="http://a/v1", concurrency=2), resume=False)
    run.start(settings(base_url="http://b/v1", concurrency=8), resume=True)
    with pytest.raises(RunSettingsMismatch, match="model: was 'm', now 'other'"):
        run.start(settings(model="other"), resume=True)
    with pytest.raises(FileExistsError, match="--resume"):
        run.start(settings(), resume=False)
    with pytest.raises(FileNotFoundError):
        RunDir(tmp_path / "none").start(settings(), resume=True)


def test_resume_compares_the_whole_env_spec_but_not_the_sandbox_backend(tmp_path):
    run = RunDir(tmp_path)
    spec = EnvSpec(tasks="builtin", max_steps=10, wrappers=("forced",),
                   judge=JudgeEndpoint(base_url="http://a/v1", model="judge"))
    run.start(settings(env=spec), resume=False)
    moved = spec.model_copy(update={"sandbox": "local", "judge": JudgeEndpoint(
        base_url="http://b/v1", model="judge")})
    run.start(settings(env=moved), resume=True)
    weaker = spec.model_copy(update={"reward": RewardConfig(strength=False)})
    with pytest.raises(RunSettingsMismatch,
                       match=r"env.reward.strength: was \{'mutants': 4, .*\}, now None"):
        run.start(settings(env=weaker), resume=True)
    fewer = spec.model_copy(update={"reward": RewardConfig(strength={"mutants": 2})})
    with pytest.raises(RunSettingsMismatch, match="env.reward.strength.mutants: was 4, now 2"):
        run.start(settings(env=fewer), resume=True)


def test_settings_written_before_the_env_spec_are_read(tmp_path):
    legacy = {"policy": "openai", "model": "m", "tasks": "suite", "task_ids": ["a"],
              "attempts": 2, "max_steps": 12, "wrappers": ["gate"], "reserve": 2, "seed": 0,
              "temperature": 0.7, "max_tokens": 64, "judge_model": "j", "base_url": "",
              "concurrency": 4, "extra": {}}
    read = RunSettings.from_dict(legacy)
    assert (read.tasks, read.max_steps, read.wrappers, read.reserve, read.judge_model) == (
        "suite", 12, ("gate",), 2, "j")
    assert RunSettings.from_dict(read.to_dict()) == read
    with pytest.raises(ValueError, match="unknown settings"):
        RunSettings.from_dict({**legacy, "colour": "red"})


def test_accuracy_interval_is_wilson_and_not_zero_width_at_three_attempts():
    """REAL_MODEL.md: three wrong attempts printed "0.0% ± 0.0"."""
    from vera_env.evaluation.metrics import wilson_interval

    summary = summarise([att("a", k, correct=False) for k in range(3)], 3)
    low, high = summary.accuracy.ci95 or (None, None)
    assert low == 0.0 and high == pytest.approx(0.5615, abs=1e-3)
    assert "0.0% [0.0–56.2]" in format_summary(summary)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(5, 10)[0] == pytest.approx(
        0.2366, abs=1e-3)
    with pytest.raises(ValueError):
        wilson_interval(4, 3)


def test_answers_are_counted_by_the_phase_that_released_them():
    """REAL_MODEL.md: every answer came through the forced prompt and the summary said
    ``answers_forced: 0`` (it counted only the extra ask)."""
    attempts = [att("a", 0, answer_phase="forced"), att("a", 1, answer_phase="forced"),
                att("b", 0, answer_phase="open"),
                att("c", 0, answer_phase="extra", answer_forced=True),
                att("d", 0, "max_steps")]
    summary = summarise(attempts, 2)
    assert (summary.answers.free, summary.answers.under_forcing,
            summary.answers.extra_ask) == (1, 2, 1)
    assert "answers free / forced / extra ask  1 / 2 / 1" in format_summary(summary)

def test_harness_errors_are_excluded_but_listed_and_printed_first():
    attempts = [att("a", 0), att("b", 0, "error", error="KeyError: 'x' (at env.py:12 in step)"),
                att("c", 0, "error", error="ValueError: y")]
    s = summarise(attempts, k=1)
    assert (s.scored, s.excluded, s.statuses["error"]) == (1, 2, 2)
    assert s.to_dict()["harness_errors"] == [
        {"task_id": "b", "attempt_index": 0, "error": "KeyError: 'x' (at env.py:12 in step)"},
        {"task_id": "c", "attempt_index": 0, "error": "ValueError: y"}]
    first_row = format_summary(s).splitlines()[0]
    assert first_row.startswith("HARNESS ERRORS") and "b #0: KeyError" in first_row
    assert "HARNESS" not in format_summary(summarise([att("a", 0)], k=1))

def test_summary_reports_canary_rate_apart_from_accuracy():
    canary = "real.csv.lung_median.s0+absent"
    attempts = [Attempt(task_id=canary, attempt_index=0, answer="306", correct=False),
                Attempt(task_id=canary, attempt_index=1, answer="cannot be determined",
                        correct=True),
                Attempt(task_id=canary, attempt_index=2, answer="", status="provider"),
                att("real.csv.lung_median.s0", 0)]
    s = summarise(attempts, k=3)
    assert (s.canaries.rate, s.canaries.attempts) == (0.5, 2)  # the provider fault excluded
    assert "canary rate (answered with a value)  50.0% of 2 canary attempts" in \
        format_summary(s)
    assert "answerable tasks abstained on        0.0%" in format_summary(s)
    assert "canary" not in format_summary(summarise([att("a", 0)], k=1))
