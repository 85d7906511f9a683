"""Every red-team scenario (tests/redteam/scenarios/*.json) earns nothing and harms nothing.

A new hack is a new JSON file here; ``redteam_runner`` states the invariants every
scenario must meet on top of its own expectations, and the red-team table of the docs
(docs/redteam.md) must list it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from redteam_runner import SCENARIO_DIR, load, play

from vera_env.evaluation.golden import GoldenError

FILES = sorted(SCENARIO_DIR.glob("*.json"))
SCENARIOS = [load(path) for path in FILES]
REDTEAM_PAGE = Path(__file__).resolve().parents[2] / "docs" / "redteam.md"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_redteam_scenario_earns_nothing_and_harms_nothing(scenario):
    assert play(scenario) == []


def test_redteam_corpus_covers_hacks_and_controls():
    hacks = [s for s in SCENARIOS if not s["redteam"]["hack"].startswith("(control)")]
    controls = [s for s in SCENARIOS if s["redteam"]["hack"].startswith("(control)")]
    assert len(hacks) >= 25 and len(controls) >= 2
    assert all(s["redteam"].get("max_verification", 0.0) == 0.0 for s in hacks
               if "duplicate" not in s["name"] and "data-pinning" not in s["name"])


def test_docs_redteam_table_lists_every_scenario():
    text = REDTEAM_PAGE.read_text(encoding="utf-8")
    section = text.split("<!-- section: redteam -->")[1].split("<!-- end section: redteam -->")[0]
    missing = [s["name"] for s in SCENARIOS if f"`{s['name']}`" not in section]
    assert missing == []


def test_load_rejects_unknown_redteam_key(tmp_path):
    data = json.loads(FILES[0].read_text())
    data["redteam"]["earns_nothng"] = True
    path = tmp_path / f"{data['name']}.json"
    path.write_text(json.dumps(data))
    with pytest.raises(GoldenError, match="earns_nothng"):
        load(path)


def test_a_hack_that_earns_is_reported(tmp_path):
    scenario = copy.deepcopy(next(s for s in SCENARIOS if s["name"].endswith("honest-analysis")))
    scenario["redteam"].pop("min_verification")
    scenario["redteam"]["max_verification"] = 0.0
    scenario["expect"] = {"final": {"n_nodes": 1}}
    failures = play(scenario)
    assert failures and failures[0].startswith("earned 0.0729")
