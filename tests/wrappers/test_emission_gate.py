"""EmissionGate: answers need a verified leaf while budget remains."""

from __future__ import annotations

import pytest

from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.wrappers import EmissionGate, ForcedAnswer
from vera_env.wrappers.forced_answer import PREFILL

VERIFIED = ('<command>true</command>\nNODE kind=test summary="mean of valid drinks is 5"\n'
            "CHECK range \"mean 5\" :: awk -F'\\t' 'NR>1 && $3!=-999 {s+=$3;n++} "
            "END{print (s/n==5) ? \"True\" : \"False\"}' alcohol.txt\n")
FAILING = ('<command>true</command>\nNODE kind=test summary="mean is 4"\n'
           "CHECK range \"mean 4\" :: awk -F'\\t' 'NR>1 {s+=$3;n++} "
           "END{print (s/n==4) ? \"True\" : \"False\"}' alcohol.txt\n")


@pytest.fixture
def env(alcohol_task):
    env = EmissionGate(VeraEnv([alcohol_task], max_steps=4))
    yield env
    env.close()


def test_answer_without_any_node_is_withheld_with_nudge(env):
    env.reset(seed=0)
    obs, reward, term, _, info = env.step("FINAL ANSWER: 5")
    assert not term and info[keys.GATED] == 1 and info[keys.ANSWER] == ""
    assert "withheld" in info[keys.NUDGE] and "withheld" in obs
    assert reward == 0.0  # withholding is not a format error


def test_answer_released_when_same_turn_adds_a_verified_leaf(env):
    env.reset(seed=0)
    _, _, term, _, info = env.step(VERIFIED + "FINAL ANSWER: 5")
    assert term and info[keys.NODE] != {} and info[keys.CORRECT] is True
    assert info[keys.GATED] == 0


def test_withheld_turn_still_runs_command_and_records_node(env):
    env.reset(seed=0)
    _, _, term, _, info = env.step(FAILING + "FINAL ANSWER: 4")
    assert not term and info[keys.NODE] != {} and info[keys.GATED] == 1
    _, _, term, _, info = env.step(VERIFIED.replace("NODE kind=test", "NODE kind=test parents=n1")
                                   + "FINAL ANSWER: 5")
    assert term and info[keys.GATED] == 1 and info[keys.CORRECT] is True


def test_gate_closed_on_last_step_still_releases(env):
    env.reset(seed=0)
    for _ in range(3):
        env.step("FINAL ANSWER: 5")
    _, _, term, _, info = env.step("FINAL ANSWER: 5")
    assert term and info[keys.GATED] == 3 and info[keys.ANSWER] == "5"


def test_forced_answer_is_released_with_gate_closed(alcohol_task):
    for env in (ForcedAnswer(EmissionGate(VeraEnv([alcohol_task], max_steps=3)), reserve=2),
                EmissionGate(ForcedAnswer(VeraEnv([alcohol_task], max_steps=3), reserve=2))):
        env.reset(seed=0)
        _, _, term, _, info = env.step("FINAL ANSWER: 5")
        assert not term and info[keys.GATED] == 1 and info[keys.FORCING]
        _, _, term, _, info = env.step(PREFILL + "5")
        assert term and info[keys.ANSWER] == "5"
        env.close()


NON_DISCRIMINATING = ('<command>true</command>\nNODE kind=test summary="the mean is 5"\n'
                      'CHECK range "mean 5" :: echo True\n'
                      'CHECK type "file there" :: test -f alcohol.txt && echo True || echo False\n')


def test_leaf_whose_checks_pass_but_do_not_discriminate_does_not_open_the_gate(env):
    """A check that passes on every mutant of its data (``echo True``) verifies nothing,
    so it cannot release an answer either: otherwise the cheapest way past the gate is
    the check that earns no reward."""
    env.reset(seed=0)
    _, _, term, _, info = env.step(NON_DISCRIMINATING + "FINAL ANSWER: 5")
    assert [c["passed"] for c in info[keys.CHECKS]] == [True, True]
    assert [c["discriminating"] for c in info[keys.CHECKS]] == [False, False]
    assert not term and info[keys.GATED] == 1 and info[keys.ANSWER] == ""
    assert "withheld" in info[keys.NUDGE]


def test_leaf_verified_reads_discrimination_not_only_the_verdict():
    from vera_env.observation.state import AnalysisState
    from vera_env.records import NodeRecord
    from vera_env.verification.checks import CheckResult

    def state_with(discriminating):
        state = AnalysisState()
        check = CheckResult("c", "range", "cmd", True, discriminating=discriminating)
        state.add(NodeRecord(id="n1", kind="test", summary="s", checks=(check,)))
        return state

    assert state_with(True).leaf_verified() and state_with(None).leaf_verified()
    assert not state_with(False).leaf_verified()


def test_leaf_verified_reads_leaves_not_the_nodes_built_on():
    from vera_env.observation.state import AnalysisState
    from vera_env.records import NodeRecord
    from vera_env.verification.checks import CheckResult

    state = AnalysisState()
    state.add(NodeRecord(id="n1", kind="test", summary="s",
                         checks=(CheckResult("c", "range", "cmd", True),)))
    assert state.leaf_verified()
    state.add(NodeRecord(id="n2", kind="test", summary="t", parents=("n1",),
                         checks=(CheckResult("c", "range", "cmd", False),)))
    assert not state.leaf_verified()


def test_gate_switch_is_on_while_wrapped_back_on_at_reset_and_off_after_close(alcohol_task):
    base = VeraEnv([alcohol_task], max_steps=4)
    env = EmissionGate(base)
    assert base.require_verified_leaf is True
    base.require_verified_leaf = False
    env.reset(seed=0)
    assert base.require_verified_leaf is True
    assert env.step("FINAL ANSWER: 5")[4][keys.GATED] == 1
    env.close()
    assert base.require_verified_leaf is False


def test_gate_nudge_is_the_one_the_env_withholds_with(env):
    from vera_env.wrappers.emission_gate import GATE_NUDGE

    env.reset(seed=0)
    info = env.step("FINAL ANSWER: 5")[4]
    assert info[keys.NUDGE] == f"your answer was withheld: {GATE_NUDGE}"
