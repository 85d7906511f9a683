"""Golden scenarios: every recorded incident replayed through the real environment."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from vera_env.evaluation.golden import GoldenError, load_scenarios, run_scenario, validate

GOLDEN = Path(__file__).parent.parent / "golden"
SCENARIOS = load_scenarios(GOLDEN)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_golden_scenario_holds(scenario):
    assert run_scenario(scenario) == []


def test_run_scenario_reports_turns_left_after_the_end_and_wrong_expectations():
    scenario = _base()
    scenario["turns"] = scenario["turns"] + ["FINAL ANSWER: again"] * 30
    scenario["max_steps"] = len(scenario["turns"])
    scenario["expect"] = {"final": {"answer": "certainly not this"}}
    failures = run_scenario(scenario)
    assert any("the episode had already ended" in f for f in failures)
    assert any(f.startswith("final: answer: expected 'certainly not this'") for f in failures)


def test_golden_corpus_is_not_empty():
    assert len(SCENARIOS) >= 10


def _base():
    scenario = copy.deepcopy(SCENARIOS[0])
    scenario.pop("_file", None)
    return scenario


def test_validate_rejects_unknown_key():
    scenario = _base()
    scenario["expcet"] = {}
    with pytest.raises(GoldenError, match="unknown key"):
        validate(scenario, "x.json")


def test_validate_rejects_scenario_that_asserts_nothing():
    scenario = _base()
    scenario["expect"] = {}
    with pytest.raises(GoldenError, match="asserts nothing"):
        validate(scenario, "x.json")


def test_validate_rejects_step_expectation_without_assertion_or_out_of_range():
    scenario = _base()
    scenario["expect"] = {"steps": [{"at": 1}]}
    with pytest.raises(GoldenError, match="asserts nothing"):
        validate(scenario, "x.json")
    scenario["expect"] = {"steps": [{"at": 99, "terminated": True}]}
    with pytest.raises(GoldenError, match="outside"):
        validate(scenario, "x.json")


def test_validate_rejects_typo_in_step_assertion():
    scenario = _base()
    scenario["expect"] = {"steps": [{"at": 1, "node_recorderd": True}]}
    with pytest.raises(GoldenError, match="node_recorderd"):
        validate(scenario, "x.json")


def test_a_wrong_expectation_is_reported_not_passed():
    scenario = _base()
    scenario["expect"] = {"final": {"n_nodes": 42}}
    failures = run_scenario(scenario)
    assert failures and "n_nodes" in failures[0]
