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
    readers = [*sorted((ROOT / "vera_env").rglob("*.py")), ROOT / "training" / "collect.py"]
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
