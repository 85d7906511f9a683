"""Phase lines: the prefix with the script and elapsed seconds, throttling, the main process."""

from __future__ import annotations

import io

import pytest

from vera_env.training.phase_log import PhaseLog, batch_label, main_process


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_phase_log_line_names_the_script_and_seconds_since_start():
    out, clock = io.StringIO(), Clock()
    log = PhaseLog("grpo", stream=out, clock=clock)
    clock.now += 12.4
    log("starting 8 environments")
    assert out.getvalue() == "[grpo +12s] starting 8 environments\n"
    assert log.elapsed_s == pytest.approx(12.4)


def test_phase_log_every_writes_only_after_a_quiet_spell():
    out, clock = io.StringIO(), Clock()
    log = PhaseLog("grpo", stream=out, clock=clock)
    log("step 1/2: rolling out 8 episodes")
    for round_ in range(1, 4):  # three rounds within ten seconds of the last line
        clock.now += 3
        log.every(10, f"rollout round {round_}")
    clock.now += 2
    log.every(10, "rollout round 4")
    assert [line.split("] ")[1] for line in out.getvalue().splitlines()] == [
        "step 1/2: rolling out 8 episodes", "rollout round 4"]


def test_phase_log_disabled_writes_nothing():
    out = io.StringIO()
    log = PhaseLog("sft", stream=out, enabled=False)
    log("loading the model")
    log.every(0, "anything")
    assert out.getvalue() == ""


def test_phase_log_default_stream_is_stderr_at_write_time(capsys):
    PhaseLog("collect")("playing 2 episodes")
    captured = capsys.readouterr()
    assert captured.err.endswith("] playing 2 episodes\n") and captured.out == ""


def test_main_process_is_rank_zero_or_no_launcher(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    assert main_process()
    monkeypatch.setenv("RANK", "1")
    assert not main_process()
    monkeypatch.setenv("RANK", "0")
    assert main_process()


@pytest.mark.parametrize(("args", "label"), [
    (("train", 0, 4), "step 1/4"),
    (("train", 0, 4, 2), "steps 1-2/4"),
    (("train", 3, 4, 2), "step 4/4"),  # the last batch feeds only what is left
    (("train", 2, 8, 2, 2), "steps 3-4/8 (each of 2 processes)"),
    (("eval", 5, 8), "evaluation at step 5"),
])
def test_batch_label_names_the_optimizer_steps_a_generation_batch_feeds(args, label):
    assert batch_label(*args) == label
