"""Folder and JSONL suites: good ones load, broken ones name file, task and field."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vera_env.errors import TaskFileError
from vera_env.tasks import Task, TaskSource, UnknownTaskError, load_tasks
from vera_env.tasks.loaders import load_folder, load_jsonl

GOOD = {"question": "What is the mean body mass (g) of Gentoo penguins? Two decimals.",
        "answer": "5076.02", "grader": {"kind": "numeric", "rel_tol": 0.001},
        "tags": ["tabular"], "solution": ["<command>ls</command>", "FINAL ANSWER: 5076.02"]}


def _suite(root: Path, tasks: dict[str, Any], *, data: bool = True) -> Path:
    for name, body in tasks.items():
        folder = root / name
        folder.mkdir(parents=True)
        text = body if isinstance(body, str) else json.dumps(body)
        (folder / "task.json").write_text(text)
        if data:
            (folder / "data").mkdir()
            (folder / "data" / "penguins.csv").write_text("species,mass\nGentoo,5076.02\n")
    return root


def test_folder_suite_loads_with_id_from_folder_name(tmp_path: Path) -> None:
    source = load_tasks(_suite(tmp_path, {"gentoo-mass": GOOD, "other": {**GOOD, "id": "x2"}}))
    assert source.ids() == ("gentoo-mass", "x2")
    task = source.get("gentoo-mass")
    assert task.solution[-1] == "FINAL ANSWER: 5076.02" and task.tags == ("tabular",)
    assert set(task.data_files()) == {"penguins.csv"}


@pytest.mark.parametrize(("body", "field", "message"), [
    ('{"question": "q", "answer": "1",\n "grader": {"kind": "exact"}', "json",
     "invalid JSON at line 2 column"),
    ({**GOOD, "question": ""}, "question", "at least 1 character"),
    ({k: v for k, v in GOOD.items() if k != "question"}, "question", "required field is missing"),
    ({**GOOD, "answr": "1"}, "answr", "unknown key; expected one of"),
    ({**GOOD, "grader": {"kind": "fuzzy"}}, "grader.kind", "Input should be 'exact'"),
    ({**GOOD, "grader": {"kind": "regex", "pattern": "([a-z"}}, "grader.pattern",
     "does not compile"),
    ({**GOOD, "grader": {"kind": "numeric", "choices": ["a"]}}, "grader.choices",
     "not used by kind='numeric'"),
    ({**GOOD, "solution": ["x", 3]}, "solution[1]", "valid string"),
    ({**GOOD, "data_dir": "elsewhere"}, "data_dir", "set by the folder layout"),
    ([GOOD], "<task>", "expected a JSON object"),
])
def test_broken_folder_task_names_file_and_field(tmp_path: Path, body: Any, field: str,
                                                 message: str) -> None:
    _suite(tmp_path, {"broken-task": body})
    with pytest.raises(TaskFileError, match=re.escape(message)) as info:
        load_tasks(tmp_path)
    assert info.value.file == str(tmp_path / "broken-task" / "task.json")
    assert info.value.field == field
    assert "broken-task" in str(info.value) and field in str(info.value)


def test_folder_task_without_data_dir_rejected(tmp_path: Path) -> None:
    _suite(tmp_path, {"no-data": GOOD}, data=False)
    with pytest.raises(TaskFileError, match="missing data folder") as info:
        load_folder(tmp_path)
    assert info.value.field == "data_dir" and "no-data" in info.value.file


def test_folder_duplicate_ids_rejected(tmp_path: Path) -> None:
    _suite(tmp_path, {"a": {**GOOD, "id": "same"}, "b": {**GOOD, "id": "same"}})
    with pytest.raises(TaskFileError, match="duplicate id 'same'"):
        load_folder(tmp_path)


def test_folder_without_tasks_rejected(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    with pytest.raises(TaskFileError, match="no <task_id>/task.json found.*BioMysteryBench"):
        load_tasks(tmp_path)


def test_multiple_errors_are_all_listed(tmp_path: Path) -> None:
    _suite(tmp_path, {"t": {"answer": "1", "grader": {"kind": "exact"}, "extra": 1}})
    with pytest.raises(TaskFileError, match=r"required field is missing; also extra: unknown key"):
        load_tasks(tmp_path)


def _jsonl(path: Path, lines: list[Any]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_jsonl_loads_with_data_dir_relative_to_file(tmp_path: Path) -> None:
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "x.txt").write_text("1")
    path = _jsonl(tmp_path / "suite.jsonl", [{**GOOD, "id": "a", "data_dir": "d1"}, "",
                                             {**GOOD, "id": "b"}])
    source = load_tasks(path)
    assert source.ids() == ("a", "b") and len(source) == 2
    assert source.get("a").data_files() == {"x.txt": tmp_path / "d1" / "x.txt"}
    assert source.get("b").data_dir is None


@pytest.mark.parametrize(("line", "field", "message"), [
    ('{"id": "a", "question": ', "json", "invalid JSON at line 1 column"),
    ({**GOOD, "id": "a", "grader": {"kind": "set", "rubric": "r"}}, "grader.rubric", "(task 'a')"),
    ({**GOOD}, "id", "required field is missing"),
    ({**GOOD, "id": "a", "data_dir": "missing"}, "data_dir", "not an existing directory"),
])
def test_broken_jsonl_line_names_file_line_and_field(tmp_path: Path, line: Any, field: str,
                                                     message: str) -> None:
    path = _jsonl(tmp_path / "suite.jsonl", [{**GOOD, "id": "ok"}, line])
    with pytest.raises(TaskFileError, match=re.escape(message)) as info:
        load_jsonl(path)
    assert info.value.file == f"{path}:2" and info.value.field == field


def test_jsonl_duplicate_and_empty_rejected(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="duplicate id 'a' \\(also line 1\\)"):
        load_jsonl(_jsonl(tmp_path / "d.jsonl", [{**GOOD, "id": "a"}, {**GOOD, "id": "a"}]))
    with pytest.raises(TaskFileError, match="no tasks in file"):
        load_jsonl(_jsonl(tmp_path / "e.jsonl", [""]))


@pytest.mark.parametrize("name", ["nope", "nope.jsonl", "tasks.csv"])
def test_load_tasks_rejects_unknown_paths(tmp_path: Path, name: str) -> None:
    if name.endswith(".csv"):
        (tmp_path / name).write_text("x")
    with pytest.raises(TaskFileError, match=r"expected a named source \(builtin, real, "
                                            r"perturbed, canary, curriculum\), a suite folder, "
                                            r"a .jsonl"):
        load_tasks(tmp_path / name)


def test_load_tasks_accepts_task_list_and_source() -> None:
    task = Task(id="t", question="q", answer="a", grader={"kind": "exact"})
    source = load_tasks([task])
    assert load_tasks(source) is source and list(source) == [task]
    with pytest.raises(TypeError, match="expected Task objects"):
        load_tasks([{"id": "t"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="tasks must be"):
        load_tasks(3)  # type: ignore[arg-type]


def test_task_source_unknown_id_lists_known_ids() -> None:
    tasks = [Task(id=f"t{i}", question="q", answer="a", grader={"kind": "exact"}) for i in range(7)]
    source = TaskSource(tasks, name="mine")
    expected = r"no task 'zz' in mine \(7 tasks\); known ids include: 't0', 't1', .*, 't4', \.\.\."
    with pytest.raises(UnknownTaskError, match=expected) as info:
        source.get("zz")
    assert isinstance(info.value, KeyError) and str(info.value).startswith("no task")


def test_task_source_pick_is_uniform_and_reproducible() -> None:
    tasks = [Task(id=f"t{i}", question="q", answer="a", grader={"kind": "exact"}) for i in range(3)]
    source = TaskSource(tasks)
    draws = [source.pick(np.random.default_rng(0)).id for _ in range(2)]
    assert draws[0] == draws[1]
    rng = np.random.default_rng(1)
    assert {source.pick(rng).id for _ in range(60)} == {"t0", "t1", "t2"}
    with pytest.raises(ValueError, match="duplicate task id 't0'"):
        TaskSource([tasks[0], tasks[0]])
