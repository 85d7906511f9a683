"""The trainer's numbers (format errors, mean return, canaries) in every form of the report."""

from __future__ import annotations

import json
from pathlib import Path

from vera_env.cli import main
from vera_env.evaluation.report import build_markdown
from vera_env.evaluation.rundir import RunDir
from vera_env.records import StepRecord
from vera_env.rollout import Attempt

ROWS = ("format errors (rejected turns)", "mean return (episode reward)",
        "canaries answered undetermined")


def test_report_oracle_run_shows_turn_metrics_in_json_html_and_markdown(
        oracle_run: Path, tmp_path: Path) -> None:
    summary = json.loads((oracle_run / "summary.json").read_text())
    attempts = RunDir(oracle_run).attempts()
    turns = sum(len(a.steps) for a in attempts)
    assert (summary["turns"], summary["rejected_turns"], summary["format_error_rate"]) == \
        (turns, 0, 0.0)
    assert summary["mean_return"] > 1.0 and summary["canary_right_rate"] is None
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(oracle_run), "--out", str(html), "--markdown", str(md)]) == 0
    page, text = html.read_text(), md.read_text()
    for row in ROWS:
        assert f"<th>{row.replace(chr(39), '&#x27;')}</th>" in page
        assert f"| {row} |" in text
    assert f"| format errors (rejected turns) | 0.0% (0 of {turns} turns) |" in text
    assert f"| mean return (episode reward) | {summary['mean_return']:.3f} |" in text
    assert "| canaries answered undetermined | — |" in text
    assert text.count("| right right |") == 2  # two tasks, each right in both attempts


def test_build_markdown_cell_text_keeps_the_table_intact(oracle_run: Path) -> None:
    settings = RunDir(oracle_run).settings()
    odd = Attempt(task_id="a|b", answer="x", correct=True, score=1.0,
                  steps=[StepRecord(action="x", reward=1.0, error="bad\nturn")])
    text = build_markdown(settings, [odd], truths={"a|b": "two\nlines"})
    row = next(line for line in text.splitlines() if line.startswith("| a\\"))
    assert row == "| a\\|b | two lines | right | 1/1 | 100% |"
