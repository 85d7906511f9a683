"""Shared fixtures: small inline tasks with real data files, run in the real sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera_env.tasks import Task

ALCOHOL = "id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n"


@pytest.fixture
def alcohol_task(tmp_path: Path) -> Task:
    """A tab-separated table whose mean of 'drinks' is 5 once the sentinel is dropped."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "alcohol.txt").write_text(ALCOHOL)
    return Task(id="alcohol-mean", question="Mean drinks, ignoring -999? One decimal.",
                answer="5.0", grader={"kind": "numeric", "abs_tol": 0.05}, data_dir=data)
