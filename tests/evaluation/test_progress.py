"""The progress bar: tqdm draws it; turns move it between finished attempts."""

from __future__ import annotations

import io

from vera_env.evaluation.progress import Progress
from vera_env.records import StepRecord
from vera_env.rollout import Attempt


def test_turns_and_tally_show_and_a_log_gets_whole_lines():
    """REAL_MODEL.md: on CPU an eval sat for minutes at "0 recorded" with no sign of life."""
    out = io.StringIO()
    progress = Progress(2, already=1, stream=out, log_interval_s=0)
    attempt = Attempt(task_id="seq.gc", steps=[StepRecord(), StepRecord()])
    progress.step(attempt)
    assert "turns 1" in out.getvalue() and "seq.gc turn 2" in out.getvalue()
    assert "1/3" in out.getvalue()  # a resumed run counts what it already had
    progress.update(Attempt(task_id="seq.gc", status="ok", answer="4", correct=True))
    progress.update(Attempt(task_id="seq.gc", status="provider"))
    progress.close()
    progress.close()
    text = out.getvalue()
    assert "\r" not in text and text.endswith("\n")
    assert "3/3" in text.splitlines()[-1]
    assert "right 1 wrong 0 excluded 1" in text.splitlines()[-1]


def test_a_log_is_not_flooded():
    out = io.StringIO()
    progress = Progress(1000, stream=out, log_interval_s=3600)
    for i in range(1000):
        progress.step(Attempt(task_id="t", steps=[StepRecord()]))
        progress.update(Attempt(task_id="t", status="ok", answer="1", correct=i % 2 == 0))
    progress.close()
    assert len(out.getvalue().splitlines()) <= 2
    assert "right 500 wrong 500" in out.getvalue()
