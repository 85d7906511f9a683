"""vera_env.turns: what one turn does in its phase, played on a real staged episode."""

from __future__ import annotations

import pytest

from vera_env.episode import Episode, Turn
from vera_env.phase import Phase
from vera_env.sandbox import SandboxLimits, make_sandbox
from vera_env.turns import GATE_NUDGE, TurnRules, play_turn

RULES = TurnRules(max_action_chars=200, check_timeout_s=10.0, max_steps=3, strength=False)


@pytest.fixture
def episode(alcohol_task):
    sandbox = make_sandbox("auto", SandboxLimits())
    ep = Episode(task=alcohol_task, workspace=sandbox.stage(alcohol_task.data_files()))
    yield ep
    ep.close()
    sandbox.close()


def test_answer_only_turn_refuses_a_command_without_running_it(episode):
    turn = Turn(phase=Phase.FORCED)
    play_turn(episode, "<command>touch ran</command>", turn, RULES)
    assert "FINAL ANSWER was not usable" in turn.error and "no 'FINAL ANSWER:'" in turn.error
    assert not episode.recent and not episode.answer
    assert episode.workspace.run("test -e ran && echo y || echo n").stdout.strip() == "n"


def test_answer_only_turn_releases_and_grades_a_usable_answer(episode):
    turn = Turn(phase=Phase.EXTRA)
    play_turn(episode, "FINAL ANSWER: 5.0", turn, RULES)
    assert (episode.answer, episode.answer_phase, episode.correct) == ("5.0", Phase.EXTRA, True)
    assert turn.answer_forced and turn.correctness == 1.0 and not turn.error


def test_free_turn_over_the_action_limit_runs_nothing(episode):
    turn = Turn(phase=Phase.OPEN)
    play_turn(episode, "<command>touch ran</command>" + " " * 200, turn, RULES)
    assert "the limit is 200" in turn.error and not episode.recent


def test_gate_withholds_with_budget_left_and_releases_on_the_last_step(episode):
    gated = TurnRules(max_action_chars=200, check_timeout_s=10.0, max_steps=3, gate=True,
                      strength=False)
    episode.steps = 1
    turn = Turn(phase=Phase.OPEN)
    play_turn(episode, "FINAL ANSWER: 5.0", turn, gated)
    assert episode.gated == 1 and not episode.answer and GATE_NUDGE in turn.notes[0]
    episode.steps = 3
    play_turn(episode, "FINAL ANSWER: 5.0", Turn(phase=Phase.OPEN), gated)
    assert episode.answer == "5.0" and episode.answer_phase is Phase.OPEN
