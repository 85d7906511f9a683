"""HumanPolicy: the observation as the model sees it, multi-line turns, prefill, quitting."""

from __future__ import annotations

import io

import pytest

from vera_env.errors import PolicyError
from vera_env.policies import HumanPolicy


def play(typed: str, info: dict) -> tuple[str, str]:
    out = io.StringIO()
    turn = HumanPolicy(io.StringIO(typed), out).act("QUESTION: what?\n\nSteps left: 3.", info)
    return turn, out.getvalue()


def test_multiline_turn_ends_at_a_lone_dot_and_observation_is_shown_verbatim():
    turn, screen = play("<command>\nwc -l x\n</command>\n.\nleft over\n", {"step": 0})
    assert turn == "<command>\nwc -l x\n</command>"
    assert "QUESTION: what?\n\nSteps left: 3." in screen and "harness:" not in screen


def test_forced_turn_starts_with_the_prefill():
    turn, screen = play("36\n.\n", {"step": 4, "prefill": "FINAL ANSWER: ",
                                     "reward_parts": {"verification": 0.1, "penalty": 0.02}})
    assert turn == "FINAL ANSWER: 36"
    assert "> FINAL ANSWER: " in screen and "reward +0.080" in screen


def test_end_of_input_after_text_submits_and_on_empty_turn_quits():
    assert play("FINAL ANSWER: 5", {})[0] == "FINAL ANSWER: 5"
    with pytest.raises(PolicyError, match="quit"):
        play("", {})


def test_harness_line_reports_checks_and_rejection():
    _, screen = play(".\n", {"step": 2, "checks": [{"passed": True}, {"passed": False}],
                             "error": "no block found", "reward_parts": {}})
    assert "checks 1/2 passed" in screen and "turn rejected: no block found" in screen
