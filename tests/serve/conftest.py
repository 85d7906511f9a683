"""Fixtures of the serve tests: a small folder suite with real data. The tests need the
``serve`` extra (openenv, ors-sdk); under CI a missing extra fails rather than skips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from extras import require

require("openenv", "ors", extra="serve")

from serve_helpers import DRINKS, NODE  # noqa: E402 (after the requirement above)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    """A folder suite: a numeric task with a reference solution, and an ``llm``-graded
    task (no judge is served, so its answers are unscorable)."""
    root = tmp_path / "suite"
    for task_id, grader in (("drinks-mean", {"kind": "numeric", "abs_tol": 0.05}),
                            ("drinks-judged", {"kind": "llm", "rubric": "Score 1.0 if 5."})):
        folder = root / task_id
        (folder / "data").mkdir(parents=True)
        (folder / "data" / "drinks.tsv").write_text(DRINKS)
        (folder / "task.json").write_text(json.dumps({
            "question": "Mean of 'drinks', ignoring the -999 code? One decimal.",
            "answer": "5.0", "grader": grader,
            "solution": [NODE, "FINAL ANSWER: 5.0"],
            "reference": {"command": "awk -F'\\t' 'NR > 1 && $3 != -999 { s += $3; n++ } "
                                     "END { printf \"%.1f\\n\", s / n }' drinks.tsv"}}))
    return root


