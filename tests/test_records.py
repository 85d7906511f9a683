"""The one schema past ``env.step``: typed step records, one earn rule, one field list.

The run folder under ``tests/fixtures/run_v0`` was written by ``vera-env eval --policy
oracle`` before the records existed (steps were dicts copied from ``info``); it must read
the same today, and the report built from it must not change by a byte.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from vera_env import info as keys
from vera_env.evaluation.metrics import latest_attempts, summarise
from vera_env.evaluation.report import build_markdown, build_report, choose_episodes
from vera_env.evaluation.rundir import RunDir
from vera_env.policy import ScriptedPolicy
from vera_env.records import (
    STEP_FIELDS,
    STEP_RECORD_FIELDS,
    CheckRecord,
    NodeRecord,
    RewardPartsRecord,
    StepRecord,
    check_earns,
)
from vera_env.rollout import Attempt, run_episode
from vera_env.serve.session import VeraSession
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks
from vera_env.verification.checks import CheckResult
from vera_env.verification.rewards import RewardConfig, node_verification
from vera_env.wrappers import RecordEpisode

FIXTURE = Path(__file__).parent / "fixtures" / "run_v0"
ROOT = Path(__file__).parent.parent
VERDICTS = [(passed, discriminating) for passed in (True, False)
            for discriminating in (True, False, None)]


# ----- one earn rule -----

@pytest.mark.parametrize("passed, discriminating", VERDICTS)
def test_check_earns_matches_the_reward_for_every_verdict(passed: bool,
                                                          discriminating: bool | None) -> None:
    result = CheckResult("c", "range", "true", passed, discriminating=discriminating)
    record = CheckRecord.from_dict(result.to_dict())

    @dataclasses.dataclass
    class OneCheck:
        checks: tuple[CheckResult, ...]

    earned = node_verification(OneCheck((result,)), 0, RewardConfig()) > 0
    assert record.earns == earned == result.earns == check_earns(passed, discriminating)


def test_check_earns_untested_check_earns_only_when_passed() -> None:
    assert CheckRecord("c", "range", "true", True).earns
    assert not CheckRecord("c", "range", "true", False).earns
    assert not CheckRecord("c", "range", "true", True, discriminating=False).earns


def test_node_record_counts_passed_and_earning_checks() -> None:
    checks = tuple(CheckRecord(f"c{i}", "range", "true", p, discriminating=d)
                   for i, (p, d) in enumerate(VERDICTS))
    node = NodeRecord("n1", "qc", "s", checks=checks)
    assert (node.n_passed, node.n_earning) == (3, 2)


# ----- one list of fields -----

def test_step_record_fields_are_the_one_tuple_in_order() -> None:
    names = tuple(f.name for f in dataclasses.fields(StepRecord))
    assert names == STEP_RECORD_FIELDS == ("action", "reward", "terminated", "truncated",
                                           *STEP_FIELDS)
    assert tuple(StepRecord().to_dict()) == STEP_RECORD_FIELDS
    assert set(STEP_FIELDS) <= set(keys.INFO_KEYS)


def _oracle_episode(tmp_path: Path) -> tuple[Attempt, list[dict[str, Any]], dict[str, Any]]:
    """One oracle episode through RecordEpisode: the attempt, its transcript lines, and
    the reset's info."""
    source = load_tasks("builtin")
    task = source.get(source.ids()[1])
    env = RecordEpisode(EnvSpec(max_steps=12, wrappers=()).build(tasks=source), tmp_path / "rec")
    try:
        _, reset_info = env.reset(options={"task_id": task.id})
        attempt = run_episode(env, ScriptedPolicy({task.id: tuple(task.solution)}),
                              task_id=task.id)
        folder = env.episode_dir
    finally:
        env.close()
    assert folder is not None
    lines = [json.loads(line) for line in (folder / "transcript.jsonl").open()]
    return attempt, [line for line in lines if line["event"] == "step"], reset_info


def test_producers_env_attempt_and_record_episode_write_the_step_fields(tmp_path: Path) -> None:
    attempt, transcript, reset_info = _oracle_episode(tmp_path)
    assert attempt.status == "ok" and attempt.correct is True and attempt.n_nodes > 0
    assert set(reset_info) == set(keys.INFO_KEYS)  # the env's info: every key, every step
    assert all(tuple(step) == STEP_RECORD_FIELDS for step in attempt.to_dict()["steps"])
    assert [tuple(k for k in line if k not in ("event", "observation")) for line in transcript] \
        == [STEP_RECORD_FIELDS] * len(attempt.steps)
    # The transcript and the attempt hold the same record of each step.
    assert [StepRecord.from_dict(line) for line in transcript] == attempt.steps


def test_producer_serve_turn_carries_the_step_fields_and_parses_to_the_record(
        tmp_path: Path) -> None:
    source = load_tasks("builtin")
    task = source.get(source.ids()[1])
    session = VeraSession(lambda: EnvSpec(max_steps=12, wrappers=()).build(tasks=source))
    try:
        session.reset(task_id=task.id)
        turn = session.step(task.solution[0])
    finally:
        session.close()
    assert set(STEP_FIELDS) <= set(turn.fields())
    record = turn.record()
    assert record.reward == turn.reward and record.step == 1
    assert record == StepRecord.from_info(turn.info, turn.reward or 0.0, turn.terminated,
                                          turn.truncated)


_STEP_KEYS = {"node", "checks", "passed", "discriminating", "rho", "reward_parts", "killed_by",
              "evidence", "malformed"}
_KEY_NAMES = {"NODE", "CHECKS", "REWARD_PARTS"}


def _string_key_reads(path: Path) -> list[str]:
    """Subscripts and ``.get`` calls that read a step, node or check by its key."""
    def is_step_key(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in _STEP_KEYS
        return isinstance(node, ast.Attribute) and node.attr in _KEY_NAMES and \
            isinstance(node.value, ast.Name) and node.value.id == "keys"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and is_step_key(node.slice):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args and is_step_key(node.args[0]):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_readers_no_module_reads_a_step_node_or_check_by_string_key() -> None:
    # (Benchmarks are left out: their own result rows have a "checks" count.)
    readers = [*sorted((ROOT / "vera_env").rglob("*.py")), ROOT / "training" / "scripts" / "collect.py",
               ROOT / "training" / "collection.py"]
    parser = ROOT / "vera_env" / "records.py"
    found = [hit for path in readers if path != parser for hit in _string_key_reads(path)]
    assert found == []
    assert _string_key_reads(parser)  # the scan does see the one parser's reads


# ----- the JSON on disk -----

def test_from_dict_old_step_without_newer_keys_takes_defaults() -> None:
    step = StepRecord.from_dict({"action": "a", "reward": 0.5, "step": 3, "node": {},
                                 "checks": [], "error": None})
    assert step == StepRecord(action="a", reward=0.5, step=3)
    assert step.reward_parts == RewardPartsRecord() and step.node is None


def test_from_json_step_that_is_not_an_object_is_refused() -> None:
    line = json.dumps({"task_id": "t", "status": "ok", "steps": [1]})
    with pytest.raises(ValueError, match="a step is a JSON object"):
        Attempt.from_json(line)


def test_run_folder_written_before_records_reads_back_byte_for_byte() -> None:
    lines = (FIXTURE / "results.jsonl").read_text(encoding="utf-8").splitlines()
    attempts = [Attempt.from_json(line) for line in lines]
    assert [a.to_json() for a in attempts] == lines
    assert all(isinstance(s, StepRecord) for a in attempts for s in a.steps)


def test_run_folder_written_before_records_summarises_the_same_from_its_steps() -> None:
    for line in (FIXTURE / "results.jsonl").read_text(encoding="utf-8").splitlines():
        stored = Attempt.from_json(line)
        again = Attempt.from_json(line)
        again.finish()  # derived from the parsed steps alone
        assert (again.status, again.score, again.n_checks, again.n_discriminating,
                again.mean_rho, again.n_nodes, again.answer, again.correct) == \
            (stored.status, stored.score, stored.n_checks, stored.n_discriminating,
             stored.mean_rho, stored.n_nodes, stored.answer, stored.correct)


def test_run_folder_written_before_records_gives_the_same_summary_and_report(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("results.jsonl", "run.json"):
        shutil.copy(FIXTURE / name, run / name)
    folder = RunDir(run)
    settings, attempts = folder.settings(), latest_attempts(folder.attempts())
    written = json.loads((FIXTURE / "summary.json").read_text(encoding="utf-8"))
    del written["settings"], written["invocation"]
    summary = summarise(attempts, settings.attempts).to_dict()
    assert list(summary) == list(written) and summary == written
    # `vera-env report` showed the tasks' truths; the oracle's answers were all right.
    truths = {a.task_id: a.answer for a in attempts}
    html = build_report(settings, attempts, episodes=choose_episodes(attempts, 12),
                        truths=truths)
    assert html == (FIXTURE / "expected_report.html").read_text(encoding="utf-8")
    assert build_markdown(settings, attempts, truths=truths) == \
        (FIXTURE / "expected_report.md").read_text(encoding="utf-8")


# ----- every field survives a round trip -----

def _full_check(i: int) -> CheckRecord:
    """A check whose every field differs from its default and from check ``i + 1``'s."""
    return CheckRecord(name=f"c{i}", kind="range", command=f"test {i}", passed=True,
                       detail=f"detail {i}", discriminating=bool(i % 2), killed_by=(f"m{i}", "m9"),
                       evidence=f"calls.vcf.gz:F{i}", malformed=True, duration_s=0.25 + i)


def _full_step() -> StepRecord:
    node = NodeRecord(id="n1", kind="qc", summary="12 cells", artifact="a.txt",
                      parents=("n0", "nX"), command="wc -l a", step=3,
                      checks=(_full_check(0), _full_check(1)))
    return StepRecord(action="act", reward=0.75, terminated=True, truncated=True, step=3,
                      error="err", nudge="nudge", command_output="out", node=node,
                      checks=(_full_check(2),),
                      reward_parts=RewardPartsRecord(verification=0.5, correctness=1.0,
                                                     penalty=-0.02),
                      forcing=True, prefill="FINAL ANSWER:", answer="12", answer_forced=True,
                      answer_phase="forced", correct=False, grade_detail="off by 1",
                      unscorable=True, gated=2, verification_total=1.5)


def test_round_trip_keeps_every_field_of_every_record() -> None:
    step = _full_step()
    defaults = StepRecord()
    for f in dataclasses.fields(StepRecord):  # the fixture sets every field
        assert getattr(step, f.name) != getattr(defaults, f.name), f.name
    for f in dataclasses.fields(CheckRecord):
        if not f.compare:  # what the machine measured (cpu_s): not part of the record
            continue
        assert getattr(_full_check(0), f.name) != getattr(CheckRecord(name="", kind="", command="",
                                                                       passed=False), f.name), f.name
    assert StepRecord.from_dict(step.to_dict()) == step
    assert StepRecord.from_dict(json.loads(json.dumps(step.to_dict()))) == step
    assert CheckRecord.from_dict(_full_check(1).to_dict()) == _full_check(1)
    assert NodeRecord.from_dict(step.node.to_dict()) == step.node  # type: ignore[union-attr]


def test_from_dict_missing_and_null_fields_take_the_defaults() -> None:
    empty_check = CheckRecord.from_dict({})
    assert empty_check == CheckRecord(name="", kind="", command="", passed=False, detail="",
                                      discriminating=None, killed_by=(), evidence="",
                                      malformed=False, duration_s=0.0)
    nulls = {f.name: None for f in dataclasses.fields(CheckRecord)}
    assert CheckRecord.from_dict(nulls) == empty_check
    assert RewardPartsRecord.from_dict(None) == RewardPartsRecord()
    assert RewardPartsRecord.from_dict({"correctness": 0}) == RewardPartsRecord(correctness=0.0)
    assert StepRecord.from_dict({}) == StepRecord()
    assert StepRecord.from_dict({keys.NODE: {}}).node is None
    assert StepRecord.from_dict({keys.CORRECT: 0}).correct is False


def test_from_dict_coerces_stored_values_to_the_field_types() -> None:
    check = CheckRecord.from_dict({"name": 7, "passed": 1, "discriminating": 0,
                                   "killed_by": [3], "duration_s": "0.5", "malformed": 1})
    assert (check.name, check.passed, check.discriminating, check.killed_by,
            check.duration_s, check.malformed) == ("7", True, False, ("3",), 0.5, True)
    step = StepRecord.from_dict({keys.STEP: "4", keys.GATED: "2", "reward": "1.5",
                                 keys.VERIFICATION_TOTAL: "0.25", keys.UNSCORABLE: 1})
    assert (step.step, step.gated, step.reward, step.verification_total, step.unscorable) == (
        4, 2, 1.5, 0.25, True)
