"""Shared fixtures of the adapter tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture
def judged_suite(tmp_path: Path) -> Path:
    """A one-task JSONL suite (task ``judged``) graded by an LLM rubric: served with no
    judge configured, its answer cannot be graded, so the episode is unscorable."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "reads.tsv").write_text("id\tvalue\n1\t3\n")
    row = {"id": "judged", "question": "Which organism are the reads from?",
           "answer": "E. coli", "data_dir": "d",
           "grader": {"kind": "llm", "rubric": "Score 1.0 if it names Escherichia coli."}}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(row) + "\n")
    return tmp_path / "tasks.jsonl"
