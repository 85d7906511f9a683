from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vera_env.observation.budget import count_tokens
from vera_env.observation.state import AnalysisState, render_full, render_short
from vera_env.records import NodeRecord
from vera_env.verification.checks import CheckResult


def _check(passed=True, name="c", command="test 1 -eq 1 && echo True"):
    return CheckResult(name, "range", command, passed, "" if passed else "check evaluated False")


def _node(i, parents=(), summary=None, checks=None):
    return NodeRecord(id=f"n{i}", kind="qc", summary=summary or f"finding number {i} about cells",
                      parents=parents, checks=checks if checks is not None else (_check(),), step=i)


def test_add_and_leaves_follow_parents():
    state = AnalysisState()
    state.add(_node(1))
    state.add(_node(2, parents=("n1",)))
    state.add(_node(3, parents=("n1",)))
    assert [n.id for n in state.leaves()] == ["n2", "n3"]
    assert state.next_id() == "n4"
    assert "n2" in state and len(state) == 3


def test_add_rejects_unknown_parent_and_taken_id():
    state = AnalysisState()
    state.add(_node(1))
    with pytest.raises(ValueError, match="unknown parents"):
        state.add(_node(2, parents=("n9",)))
    with pytest.raises(ValueError, match="already recorded"):
        state.add(_node(1))


def test_duplicate_of_matches_summary_or_same_checks():
    state = AnalysisState()
    state.add(_node(1, summary="14,203 of 34,460 cells pass QC",
                    checks=(_check(command="A"), _check(command="B"))))
    assert state.duplicate_of("  14,203 of 34,460 CELLS pass QC ", ()) == "n1"
    assert state.duplicate_of("another finding", ("B", "A")) == "n1"
    assert state.duplicate_of("another finding", ("A",)) == ""
    assert state.duplicate_of("", ()) == ""


def test_node_rho_and_failing_checks_rendered():
    node = _node(1, checks=(_check(), _check(False, name="genes kept")))
    assert node.rho == 0.5
    text = render_full(node)
    assert "FAILED range 'genes kept'" in text
    assert "checks 1/2 passed" in text


def test_render_empty_state():
    assert AnalysisState().render(100) == "(no nodes yet)"


def test_render_keeps_leaves_and_newest_when_over_budget():
    state = AnalysisState()
    state.add(_node(1, summary="loaded the matrix " + "detail " * 30))
    for i in range(2, 200):
        state.add(_node(i, parents=(f"n{i - 1}",), summary=f"step {i} " + "words " * 20))
    text = state.render(300)
    assert count_tokens(text) <= 300
    assert "n199" in text  # the frontier survives
    assert "not shown" in text  # omitted ids are named, not silently dropped


def test_render_everything_in_full_when_it_fits():
    state = AnalysisState()
    state.add(_node(1, checks=(_check(False, name="x"),)))
    state.add(_node(2, parents=("n1",)))
    text = state.render(4000)
    assert "FAILED" in text and "n1" in text and "n2" in text and "not shown" not in text


@given(st.integers(min_value=0, max_value=120), st.integers(min_value=1, max_value=2000),
       st.text(max_size=300))
@settings(max_examples=60, deadline=None)
def test_render_never_exceeds_budget(n_nodes, budget, summary):
    state = AnalysisState()
    for i in range(1, n_nodes + 1):
        state.add(_node(i, parents=(f"n{i - 1}",) if i > 1 else (), summary=summary or "s"))
    assert count_tokens(state.render(budget)) <= budget


def test_to_dict_round_trips_structure():
    state = AnalysisState()
    state.add(_node(1))
    data = state.to_dict()
    assert data["nodes"][0]["id"] == "n1"
    assert data["nodes"][0]["checks"][0]["passed"] is True


def test_checks_that_passed_without_discriminating_are_rendered_as_such():
    """The render must not say "(checks 2/2 passed)" for checks the gate refuses."""
    weak = (_check(name="echo"), _check(name="exists"))
    weak = tuple(replace(c, discriminating=False) for c in weak)
    node = _node(1, checks=weak + (replace(_check(name="mean"), discriminating=True),))
    assert node.n_weak == 2
    text = render_full(node)
    assert "(checks 3/3 passed, 1 discriminating)" in text
    assert "NOT DISCRIMINATING range 'echo'" in text and "verifies nothing" in text
    assert "1 discriminating" in render_short(node)
    state = AnalysisState()
    state.add(node)
    assert "3/3 checks passed (2 of them not discriminating)" in state.render(500)


def test_render_unchanged_when_strength_was_not_tested():
    node = _node(1, checks=(_check(), _check()))
    assert "(checks 2/2 passed)" in render_full(node)
    assert "DISCRIMINATING" not in render_full(node)
