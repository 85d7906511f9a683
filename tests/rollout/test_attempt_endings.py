"""How an ``Attempt`` names its ending, its faults and its token usage, from steps alone.

The status and message are what ``vera-env eval`` tallies and prints (a ``max_steps``
counted as ``format`` would blame the model for the harness's budget), so each ending
is pinned here with steps built by hand, no env needed.
"""

from __future__ import annotations

import json

import pytest

from vera_env import info as keys
from vera_env.errors import PolicyError, SandboxError
from vera_env.rollout.attempt import Attempt


def _info(**fields) -> dict:
    base = {keys.TASK_ID: "t", keys.STEP: 1, keys.ERROR: "", keys.ANSWER: "",
            keys.CORRECT: None, keys.UNSCORABLE: False, keys.GRADE_DETAIL: ""}
    return {**base, **fields}


def _played(*steps: tuple[dict, bool, bool]) -> Attempt:
    attempt = Attempt.start("t")
    for info, terminated, truncated in steps:
        attempt.add_step("turn", "obs", 0.0, terminated, truncated, info)
    return attempt.finish()


def test_ending_answer_is_ok_with_no_message():
    attempt = _played((_info(**{keys.ANSWER: "42", keys.CORRECT: True}), True, False))
    assert (attempt.status, attempt.error, attempt.answer) == ("ok", "", "42")


def test_ending_unscorable_without_answer_is_sandbox_with_the_detail():
    attempt = _played((_info(**{keys.UNSCORABLE: True, keys.ERROR: "disk gone"}), True, False))
    assert (attempt.status, attempt.error, attempt.score) == ("sandbox", "disk gone", None)


def test_ending_unscorable_grade_with_answer_stays_ok():
    attempt = _played((_info(**{keys.UNSCORABLE: True, keys.ANSWER: "7",
                                keys.GRADE_DETAIL: "grader down"}), True, False))
    assert attempt.status == "ok" and attempt.score is None


def test_ending_cut_off_mid_episode_is_max_steps_saying_it_went_on():
    attempt = _played((_info(), False, False), (_info(**{keys.STEP: 2}), False, False))
    assert attempt.status == "max_steps"
    assert attempt.error == "stopped after 2 turns; the episode went on"


def test_ending_terminated_without_answer_is_not_called_cut_off():
    attempt = _played((_info(), True, False))
    assert attempt.status == "max_steps"
    assert attempt.error == "no usable answer within the budget"


def test_ending_budget_spent_with_no_wellformed_turn_is_format():
    attempt = _played((_info(**{keys.ERROR: "no block"}), False, False),
                      (_info(**{keys.STEP: 2, keys.ERROR: "still none"}), False, True))
    assert (attempt.status, attempt.error) == ("format", "no well-formed turn: still none")


def test_ending_budget_spent_after_a_wellformed_turn_is_max_steps():
    attempt = _played((_info(), False, False),
                      (_info(**{keys.STEP: 2, keys.ERROR: "bad"}), False, True))
    assert (attempt.status, attempt.error) == ("max_steps", "no usable answer within the budget")


@pytest.mark.parametrize(("exc", "status", "unscorable"), [
    (PolicyError("429 from the endpoint"), "provider", False),
    (SandboxError("bwrap died"), "sandbox", True),
])
def test_fail_attributes_a_fault_to_its_boundary(exc, status, unscorable):
    attempt = Attempt.start("t")
    with attempt.capturing():
        raise exc
    attempt.finish()
    assert (attempt.status, attempt.unscorable, attempt.score) == (status, unscorable, None)
    assert attempt.error == str(exc)


def test_fail_on_a_bug_names_its_type_and_the_line_that_raised():
    attempt = Attempt.start("t")
    with attempt.capturing():
        {}["missing"]
    assert attempt.status == "error"
    assert attempt.error.startswith("KeyError: 'missing' (at test_attempt_endings.py:")
    assert attempt.error.endswith(" in test_fail_on_a_bug_names_its_type_and_the_line_that_raised)")


def test_fail_with_no_traceback_adds_no_location():
    attempt = Attempt.start("t")
    attempt.fail(ValueError("made, not raised"))
    assert attempt.error == "ValueError: made, not raised"


def test_add_usage_sums_what_is_reported_and_keeps_none_when_nothing_is():
    attempt = Attempt.start("t")
    attempt.add_usage(None, None)
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (None, None)
    attempt.add_usage(10, 3)
    attempt.add_usage(5, None)
    attempt.add_usage(None, 4)
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (15, 7)


def test_from_json_names_the_unknown_status():
    with pytest.raises(ValueError, match=r"^unknown attempt status 'lost'$"):
        Attempt.from_json(json.dumps({"task_id": "t", "status": "lost"}))
    with pytest.raises(ValueError, match=r"^unknown attempt status None$"):
        Attempt.from_json("[1, 2]")


def test_from_json_refuses_private_fields_and_reads_public_ones():
    line = _played((_info(**{keys.ANSWER: "1"}), True, False)).to_json()
    data = json.loads(line)
    assert Attempt.from_json(line).answer == "1"
    with pytest.raises(ValueError, match=r"^not an Attempt record: private fields in the line$"):
        Attempt.from_json(json.dumps({**data, "_started": 1.0}))
    with pytest.raises(ValueError, match=r"^not an Attempt record: .*unexpected"):
        Attempt.from_json(json.dumps({**data, "surprise": 1}))
