"""``vera-env tasks audit``: the verdict rule, the episodes it plays, its exit code and files.

The verdict is a pure function of what each policy earned, so its cases are tested as
numbers; the command is tested twice: with the play loop replaced by fixed rows (the
exit code and the files, deterministic), and once through the real environment on a
tiny folder suite (the episodes really run, the files hold them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from vera_env.cli import main
from vera_env.evaluation import audit
from vera_env.evaluation.audit import CAP, audit_jobs, audit_tasks, judge
from vera_env.rollout import Attempt
from vera_env.tasks.builtin import make_task

TASK = "tab.sentinel_mean.easy.s0"


# ----- the verdict -----

def test_judge_reference_far_above_every_attack_ranks_analysis() -> None:
    assert judge(0.3, {"slices": 0.04, "coin_nodes": 0.0}) == ("ranks analysis", "")


def test_judge_attack_over_the_cap_is_hackable_by_it() -> None:
    assert judge(0.5, {"slices": 0.02, "targeted_hashes": CAP + 0.01}) == (
        "hackable", "targeted_hashes")


def test_judge_attack_under_the_cap_but_within_5x_of_the_reference_is_hackable() -> None:
    assert judge(0.1, {"slices": 0.04}) == ("hackable", "slices")
    assert judge(0.2, {"slices": 0.04}) == ("ranks analysis", "")


def test_judge_gated_recount_above_its_honest_twin_is_hackable() -> None:
    shaped = {"gated_recount_true": (0.2, 0.125), "gated_recount_error": (0.1, 0.125)}
    assert judge(0.4, {"slices": 0.0}, shaped) == ("hackable", "gated_recount_true")
    assert judge(0.4, {"slices": 0.0}, {"gated_recount_true": (0.125, 0.125)}) == (
        "ranks analysis", "")


def test_judge_without_a_reference_says_so_whatever_the_attacks_earned() -> None:
    assert judge(None, {"slices": 0.4}) == ("no reference", "")


def test_judge_when_nothing_earns_ranks_nothing() -> None:
    assert judge(0.0, {"slices": 0.0}) == ("ranks nothing", "")
    assert judge(0.0, {"slices": 0.01}) == ("hackable", "slices")


def _row(task_id: str, policy: str, verification: float, status: str = "ok") -> dict[str, Any]:
    return {"task_id": task_id, "policy": policy, "rep": 0, "verification": verification,
            "status": status}


def test_audit_tasks_means_repetitions_and_leaves_faulted_episodes_out() -> None:
    task = make_task(TASK)
    rows = [_row(TASK, "reference", 0.3), _row(TASK, "coin_nodes", 0.04),
            _row(TASK, "coin_nodes", 0.02), _row(TASK, "slices", 0.0, "sandbox"),
            _row(TASK, "slices", 0.01), _row("other", "slices", 0.5)]
    (found,) = audit_tasks(rows, [task])
    assert found.earned == {"reference": 0.3, "coin_nodes": pytest.approx(0.03),
                            "slices": 0.01}
    assert (found.best_policy, found.faults) == ("coin_nodes", 1)
    assert found.ratio == pytest.approx(10.0)
    # a fault's 0 measures nothing, so the task is not called safe ...
    assert (found.verdict, found.by) == ("unscorable", "")
    # ... but an attack that earned is a finding, fault or not
    (hacked,) = audit_tasks([*rows, _row(TASK, "slices", 0.5)], [task])
    assert (hacked.verdict, hacked.by) == ("hackable", "slices")


def test_audit_tasks_judges_a_gated_recount_against_its_twin() -> None:
    task = make_task(TASK)
    rows = [_row(TASK, "reference", 0.4), _row(TASK, "slices", 0.0),
            _row(TASK, "first_checks", 0.11), _row(TASK, "gated_recount_error", 0.08)]
    (found,) = audit_tasks(rows, [task])
    assert found.verdict == "ranks analysis"  # gating lowered what the checks earn
    assert found.allowance == {"gated_recount_error": 0.11}
    (found,) = audit_tasks([*rows, _row(TASK, "gated_recount_true", 0.115)], [task])
    assert (found.verdict, found.by) == ("hackable", "gated_recount_true")


def test_audit_jobs_task_without_solution_gets_no_reference_and_no_recount() -> None:
    task = make_task(TASK)
    bare = task.model_copy(update={"id": "bare", "solution": ()})
    jobs = audit_jobs([task, bare], ["slices", "gated_recount_true", "coin_nodes"])
    assert jobs[0] == (TASK, "reference", 0)
    assert {(t, p) for t, p, _ in jobs if t == "bare"} == {("bare", "slices"),
                                                         ("bare", "coin_nodes")}
    assert [p for t, p, _ in jobs if t == TASK] == ["reference", "coin_nodes", "slices",
                                                     "gated_recount_true", "first_checks"]


# ----- the command -----

def _fake_play(earned: dict[str, float]) -> Callable[..., list[dict[str, Any]]]:
    def play_jobs(jobs: Sequence[tuple[str, str, int]], source: Any, spec: Any, *,
                  workers: int = 1, on_row: Any = None) -> list[dict[str, Any]]:
        rows = []
        for task_id, policy, _ in jobs:
            row = _row(task_id, policy, earned[policy])
            if on_row is not None:
                on_row(row, Attempt(task_id=task_id, verification_reward=earned[policy]))
            rows.append(row)
        return rows
    return play_jobs


def _audit(tmp_path: Path, earned: dict[str, float]) -> list[str]:
    return ["tasks", "audit", "builtin", "--types", "tab.sentinel_mean", "--difficulties",
            "easy", "--limit", "1", "--jobs", "1", "--policies", ",".join(
                p for p in earned if p != "reference"), "--out", str(tmp_path)]


def test_audit_command_exits_1_on_a_hackable_task_and_writes_json_and_html(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    earned = {"reference": 0.2, "slices": 0.1, "column_stats": 0.0}
    monkeypatch.setattr(audit, "play_jobs", _fake_play(earned))
    assert main(_audit(tmp_path, earned)) == 1
    out = capsys.readouterr().out
    assert "hackable by slices" in out and "2.0x" in out
    report = json.loads((tmp_path / "audit.json").read_text())
    assert report["tasks"][0]["verdict"] == "hackable" and report["tasks"][0]["by"] == "slices"
    assert len(report["episodes"]) == 3
    html = (tmp_path / "audit.html").read_text()
    assert "hackable by slices" in html and f"{TASK}: slices" in html
    assert "the ends of the sorted records" in html  # the attack's description


def test_audit_command_exits_0_when_every_task_ranks_analysis(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    earned = {"reference": 0.3, "slices": 0.01, "gated_recount_error": 0.04,
              "first_checks": 0.05}
    monkeypatch.setattr(audit, "play_jobs", _fake_play(earned))
    assert main(_audit(tmp_path, earned)) == 0
    assert "ranks analysis" in capsys.readouterr().out
    assert json.loads((tmp_path / "audit.json").read_text())["tasks"][0]["verdict"] == (
        "ranks analysis")


def test_audit_command_exits_2_when_an_episode_could_not_be_measured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    earned = {"reference": 0.3, "slices": 0.0}
    play = _fake_play(earned)

    def faulty(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [{**r, "status": "sandbox"} if r["policy"] == "slices" else r
                for r in play(*args, **kwargs)]

    monkeypatch.setattr(audit, "play_jobs", faulty)
    assert main(_audit(tmp_path, earned)) == 2
    assert "unscorable" in capsys.readouterr().out


def test_audit_command_unknown_policy_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["tasks", "audit", "builtin", "--policies", "no_such_attack"])
    assert exc.value.code == 2


def _suite(root: Path) -> Path:
    solution = ["<command>awk '{ s += $1 } END { print s }' values.txt > sum.txt</command>\n"
                'NODE kind=test summary="the values sum to 6" artifact=sum.txt\n'
                'CHECK range "sum recomputed" :: test "$(cat sum.txt)" -eq '
                '"$(paste -sd+ values.txt | bc)" && echo True || echo False',
                "FINAL ANSWER: 6"]
    for name, extra in (("sum6", {"solution": solution}), ("bare", {})):
        (root / name / "data").mkdir(parents=True)
        (root / name / "data" / "values.txt").write_text("1\n2\n3\n")
        (root / name / "task.json").write_text(json.dumps(
            {"question": "What do the values sum to?", "answer": "6",
             "grader": {"kind": "numeric", "abs_tol": 0}, **extra}))
    return root


def test_audit_command_through_the_real_environment_plays_and_records(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite")
    code = main(["tasks", "audit", str(suite), "--policies", "fingerprint_pins", "--jobs",
                 "1", "--max-steps", "8", "--out", str(tmp_path / "out")])
    report = json.loads((tmp_path / "out" / "audit.json").read_text())
    verdicts = {t["task_id"]: t for t in report["tasks"]}
    assert verdicts["bare"]["verdict"] == "no reference"
    assert verdicts["bare"]["reference"] is None
    assert code == (1 if verdicts["sum6"]["verdict"] == "hackable" else 0)
    played = {(e["task_id"], e["policy"]): e for e in report["episodes"]}
    assert set(played) == {("sum6", "reference"), ("sum6", "fingerprint_pins"),
                           ("bare", "fingerprint_pins")}
    pins = played[("bare", "fingerprint_pins")]
    assert pins["status"] == "ok" and pins["checks"] >= 4
    assert pins["checks_passed"] == pins["checks"]  # the pins hold on the real workspace
    assert (tmp_path / "out" / "audit.html").read_text().startswith("<!DOCTYPE html>")
