"""The no-analysis policies of ``benchmarks/reward_ranking.py`` speak the wire protocol.

A policy whose turns the environment rejects, or whose pins fail on the real files,
would earn nothing for the wrong reason and make the ranking look better than it is.
These run without strength or a sandbox: the turns are parsed, and the pins run with
bash on a copy of the task's files, so they are fast.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from no_analysis import ANSWER, POLICIES, NoAnalysisPolicy, coin_nodes, host_look

from vera_env import info as keys
from vera_env.tasks.builtin import make_task
from vera_env.verification.checks import MAX_CHECKS_PER_NODE
from vera_env.wire.protocol import parse_emission

TASK_IDS = ("tab.sentinel_mean.easy.s0", "mtx.knockout_gene.easy.s0")


@pytest.fixture(scope="module", params=TASK_IDS)
def task(request):
    return make_task(request.param)


def _script(name, task):
    return POLICIES[name](task, host_look(task) if name == "inode_detector" else "")


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_every_turn_parses_and_answer_ends_it(name, task):
    turns = _script(name, task)
    emissions = [parse_emission(t) for t in turns]
    assert [e.error for e in emissions] == [""] * len(turns)
    assert emissions[0].command and not emissions[0].declares_node  # the look
    assert turns[-1] == ANSWER
    nodes = [e for e in emissions if e.declares_node]
    assert len(nodes) >= 4
    assert all(1 <= len(e.checks) <= MAX_CHECKS_PER_NODE for e in nodes)
    assert len({e.summary for e in nodes}) == len(nodes)  # no node is a re-declaration


@pytest.mark.parametrize("name", ["fingerprint_pins", "content_pins", "derived_pins",
                                  "copy_compare", "repeated_checks"])
def test_pins_on_a_copy_of_the_files_all_pass(name, task, tmp_path):
    for file, path in task.data_files().items():
        shutil.copy(path, tmp_path / file)
    verdicts = []
    for turn in _script(name, task):
        emission = parse_emission(turn)
        if emission.command:
            subprocess.run(["bash", "-c", emission.command], cwd=tmp_path, check=False,
                           capture_output=True, timeout=60)
        for check in emission.checks:
            out = subprocess.run(["bash", "-c", check.command], cwd=tmp_path, check=False,
                                 capture_output=True, text=True, timeout=60).stdout
            verdicts.append(out.strip().splitlines()[-1:] == ["True"])
    assert verdicts and all(verdicts)


def test_repeated_checks_node_holds_one_command_three_ways():
    task = make_task(TASK_IDS[0])
    node = parse_emission(POLICIES["repeated_checks"](task)[1])
    assert len(node.checks) == 3
    shells = {c.command.split('"$(')[1].split(')"')[0] for c in node.checks}
    assert len(shells) == 1 and len({c.command for c in node.checks}) == 3


def test_coin_nodes_fill_the_step_budget_with_sixteen_checks():
    task = make_task(TASK_IDS[0])
    turns = coin_nodes(task, max_steps=12)
    assert len(turns) == 12
    assert all(len(parse_emission(t).checks) == 16 for t in turns[1:-1])


def test_inode_detector_before_the_look_only_looks():
    task = make_task(TASK_IDS[0])
    assert POLICIES["inode_detector"](task, "") == [POLICIES["inode_detector"](task, "")[0],
                                                    ANSWER]
    assert all("stat -c" in c.command or "ls -f" in c.command
               for t in _script("inode_detector", task)[1:-1] for c in parse_emission(t).checks)


def test_no_analysis_policy_builds_script_from_the_look_output():
    task = make_task(TASK_IDS[0])
    policy = NoAnalysisPolicy(POLICIES["inode_detector"], {task.id: task})
    policy.begin_episode({keys.TASK_ID: task.id})
    first = policy.act("", {keys.TASK_ID: task.id, keys.STEP: 0})
    second = policy.act("", {keys.TASK_ID: task.id, keys.STEP: 1,
                             keys.COMMAND_OUTPUT: host_look(task)})
    assert first.startswith("<command>") and parse_emission(second).declares_node
    assert policy.act("", {keys.TASK_ID: task.id, keys.STEP: 99}) == ANSWER


def test_criteria_fingerprint_over_cap_fails_and_names_the_cell():
    from reward_ranking import criteria

    table = {"a": {"reference": 0.3, "careless": 0.0, "fingerprint_pins": 0.07},
             "b": {"reference": 0.3, "careless": 0.0, "fingerprint_pins": 0.0}}
    out = criteria(table, ["reference", "careless", "fingerprint_pins"])
    assert out["no_analysis_at_most_0.05"] is False
    assert out["no_analysis_over"] == [{"task": "a", "policy": "fingerprint_pins",
                                        "verification": 0.07}]
    assert out["reference_not_5x"] == ["a"] and out["reference_mean_at_least_0.25"] is True


def test_criteria_reference_earning_nothing_ranks_nothing():
    from reward_ranking import criteria

    out = criteria({"a": {"reference": 0.0, "coin_nodes": 0.0}}, ["reference", "coin_nodes"])
    assert out["no_analysis_at_most_0.05"] is True
    assert out["reference_5x_best_no_analysis"] is False


def test_wilson_interval_at_zero_successes_is_above_zero():
    from reward_ranking import wilson

    low, high = wilson(0, 200)
    assert low == 0.0 and 0.015 < high < 0.02


def test_luck_verdict_needs_200_episodes_unless_clearly_over():
    from reward_ranking import luck

    def rows(n, hits):
        return [{"policy": "coin_nodes", "verification": 0.04 if i < hits else 0.0}
                for i in range(n)]

    assert luck(rows(13, 0))["coin_nodes"]["within_bound"] is None
    assert luck(rows(200, 4))["coin_nodes"]["within_bound"] is True
    assert luck(rows(20, 10))["coin_nodes"]["within_bound"] is False
