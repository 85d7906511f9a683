"""Task starts: the JSON prompt a dataset row carries, and how starts are drawn."""

from __future__ import annotations

import pytest

from vera_env.training.starts import Start, draw_starts, format_start, parse_start


def test_parse_start_round_trips_and_rejects_plain_prompts():
    start = Start("seq.gc_content.easy.s3", 7)
    assert parse_start(format_start(start)) == start
    with pytest.raises(ValueError, match="format_start"):
        parse_start("What is the GC content?")


def test_draw_starts_uses_every_task_before_repeating_one():
    starts = draw_starts(["a", "b", "c"], 7, seed=1)
    assert sorted(s.task_id for s in starts[:3]) == ["a", "b", "c"]
    assert len(starts) == 7 and starts == draw_starts(["a", "b", "c"], 7, seed=1)
    with pytest.raises(ValueError, match="at least one"):
        draw_starts(["a"], 0)
