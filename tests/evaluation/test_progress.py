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


def test_a_turn_shows_when_it_starts_and_a_log_gets_its_first_line_at_once():
    """A CPU checkpoint's first turn took minutes with only a clock on the screen."""
    out = io.StringIO()
    progress = Progress(2, stream=out, log_interval_s=3600)
    assert out.getvalue() == ""  # nothing has happened yet
    progress.turn(Attempt(task_id="seq.gc"))
    first = out.getvalue().splitlines()
    assert len(first) == 1 and "0/2" in first[0] and "seq.gc turn 1: generating" in first[0]
    progress.step(Attempt(task_id="seq.gc", steps=[StepRecord()]))
    progress.turn(Attempt(task_id="seq.gc", steps=[StepRecord()]))
    assert len(out.getvalue().splitlines()) == 1  # then at most one line an interval
    progress.close()
    assert "seq.gc turn 2: generating" in out.getvalue().splitlines()[-1]


def test_a_validation_log_shows_the_first_task_done_at_once():
    out = io.StringIO()
    with Progress(23, unit="task", stream=out, log_interval_s=3600) as progress:
        progress.advance("ok seq.gc.easy.s0")
        assert "1/23" in out.getvalue() and "ok seq.gc.easy.s0" in out.getvalue()
        progress.advance("ok seq.gc.easy.s1")
        assert len(out.getvalue().splitlines()) == 1
    assert "2/23" in out.getvalue().splitlines()[-1]
