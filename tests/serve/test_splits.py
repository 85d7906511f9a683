"""Splits: tasks by split and index, specs without answers, a version that tracks tasks."""

from __future__ import annotations

import json

import pytest

from vera_env.serve.splits import Splits
from vera_env.tasks import load_tasks


def test_splits_need_train_and_known_names(suite):
    with pytest.raises(ValueError, match="'train' split is required"):
        Splits({"test": str(suite)})
    with pytest.raises(ValueError, match=r"unknown split\(s\) \['dev'\]"):
        Splits({"train": str(suite), "dev": str(suite)})


def test_splits_task_specs_never_carry_the_answer(suite):
    splits = Splits({"train": "builtin", "test": str(suite)})
    assert splits.names() == ["train", "test"] and splits.num_tasks("test") == 2
    assert splits.task_specs("test") == [
        {"task_id": "drinks-judged", "split": "test", "index": 0},
        {"task_id": "drinks-mean", "split": "test", "index": 1}]
    assert splits.task_specs("train", 11, None)[0]["index"] == 11
    with pytest.raises(IndexError, match="task index 2 out of range for split 'test'"):
        splits.task_id("test", 2)
    with pytest.raises(KeyError, match="unknown split 'validation'"):
        splits.num_tasks("validation")
    # one source for the env: every split's tasks, train's listed for seeded draws
    assert splits.tasks.get("drinks-mean").answer == "5.0"
    assert splits.tasks.ids() == load_tasks("builtin").ids()


def test_splits_version_changes_with_a_task_or_its_data(suite):
    before = Splits({"train": str(suite)}).version
    assert Splits({"train": str(suite)}).version == before
    task_file = suite / "drinks-mean" / "task.json"
    task = json.loads(task_file.read_text())
    task_file.write_text(json.dumps({**task, "answer": "5.1"}))
    edited = Splits({"train": str(suite)}).version
    (suite / "drinks-mean" / "data" / "drinks.tsv").write_text("id\tdrinks\n1\t5\n")
    assert len({before, edited, Splits({"train": str(suite)}).version}) == 3
