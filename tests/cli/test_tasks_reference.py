"""``vera-env tasks validate --strict`` and ``export`` with reference programs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vera_env.cli import main
from vera_env.tasks import load_tasks
from vera_env.tasks import unreferenced as unref
from vera_env.tasks.builtin import make_task
from vera_env.tasks.cache import CACHE_ENV_VAR

_SOLUTION = ["<command>paste -sd+ values.txt | bc</command>\nNODE kind=test summary=\"sum 6\"\n"
             'CHECK range "sum" :: test "$(paste -sd+ values.txt | bc)" -eq 6 '
             "&& echo True || echo False", "FINAL ANSWER: 6"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path_factory.getbasetemp() / "cli-ref-cache"))
    monkeypatch.setattr(unref, "_announced", set())


def _suite(root: Path, **references: dict[str, str] | None) -> Path:
    for name, reference in references.items():
        (root / name / "data").mkdir(parents=True)
        (root / name / "data" / "values.txt").write_text("1\n2\n3\n")
        body = {"question": "What do the values sum to?", "answer": "6",
                "grader": {"kind": "numeric", "abs_tol": 0}, "solution": _SOLUTION,
                **({"reference": reference} if reference else {})}
        (root / name / "task.json").write_text(json.dumps(body))
    return root


def test_validate_announces_tasks_without_a_reference_and_strict_fails_on_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = _suite(tmp_path / "suite", bare=None,
                   summed={"command": "paste -sd+ values.txt | bc"})
    with pytest.warns(UserWarning, match=r"1 of 2 tasks in .* declare no reference"):
        assert main(["tasks", "validate", str(suite), "--strength", "off"]) == 0
    out = capsys.readouterr().out
    assert "2 ok, 0 failed" in out and "--strict" not in out
    assert main(["tasks", "validate", str(suite), "--strength", "off", "--strict"]) == 1
    assert "--strict: 1 tasks declare no reference (bare)" in capsys.readouterr().out
    referenced = _suite(tmp_path / "referenced", summed={"command": "paste -sd+ values.txt | bc"})
    assert main(["tasks", "validate", str(referenced), "--strength", "off", "--strict"]) == 0


def test_validate_with_strength_notes_the_rule_instead_of_failing_a_task_without_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = _suite(tmp_path / "suite", bare=None)
    with pytest.warns(UserWarning):
        assert main(["tasks", "validate", str(suite), "--strength", "all"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("bare "))
    assert " ok " in row and "0/1" in row and "no reference: its checks earn nothing" in row


def test_export_writes_reference_programs_that_load_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scripted family gets reference.py; another gets none and is counted; a suite's
    own script travels with it."""
    out_dir = tmp_path / "exported"
    assert main(["tasks", "export", "builtin", str(out_dir), "--types",
                 "tab.sentinel_mean,tab.survival_median", "--difficulties", "easy"]) == 0
    assert "wrote 2 tasks" in capsys.readouterr().out
    mean = out_dir / "tab.sentinel_mean.easy.s0"
    reference = json.loads((mean / "task.json").read_text())["reference"]
    assert reference["script"] == "reference.py"
    assert set(reference) == {"script", "mutants", "controls"}  # the family's, as files
    assert (mean / "reference.py").read_text().startswith("#!/usr/bin/env python3")
    loaded = load_tasks(out_dir)
    assert unref.unreferenced(loaded) == [loaded.get("tab.survival_median.easy.s0")]
    task = loaded.get("tab.sentinel_mean.easy.s0")
    assert task.reference_program is not None
    assert task.reference_program.script == mean / "reference.py"
    assert task.model_dump(exclude={"reference_program", "data_dir"}) == make_task(
        task.id).model_dump(exclude={"reference_program", "data_dir"})
    again = tmp_path / "again"
    assert main(["tasks", "export", str(out_dir), str(again)]) == 0
    assert (again / mean.name / "reference.py").read_bytes() == (
        mean / "reference.py").read_bytes()
    assert json.loads((again / mean.name / "task.json").read_text())["reference"] == reference


def test_eval_announces_a_suite_without_references(tmp_path: Path) -> None:
    suite = _suite(tmp_path / "suite", bare=None)
    with pytest.warns(UserWarning, match=r"1 of 1 tasks in .* declare no reference"):
        assert main(["eval", "--policy", "oracle", "--tasks", str(suite), "--max-steps", "4",
                     "--wrappers", "none", "--out", str(tmp_path / "run")]) == 0
