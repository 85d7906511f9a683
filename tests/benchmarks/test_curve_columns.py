"""``benchmarks/curve_columns.py`` and ``--from-adapters``' points, on hand-made records
(no model): nodes with two earning facts, nodes repeating evidence, the chunk's groups
and its copied per-step log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from curve_columns import evidence_nodes, step_log, training_groups  # noqa: E402

MOTIF = "seq.motif_count.easy.s0"
GC = "seq.gc_content.easy.s1"


def _check(evidence: str, *, passed: bool = True, discriminating: bool | None = True) -> dict:
    return {"name": "c", "kind": "range", "command": f"test {evidence} = x", "passed": passed,
            "discriminating": discriminating, "evidence": evidence}


def _node(node_id: str, *checks: dict) -> dict:
    return {"step": 0, "reward": 0.0,
            "node": {"id": node_id, "kind": "qc", "summary": node_id, "checks": list(checks)}}


def test_evidence_nodes_counts_two_distinct_earning_facts_and_repeats():
    attempt = {"steps": [
        {"step": 0, "reward": 0.0},  # a command turn: no node
        _node("n1", _check("q.sh:FFFF"), _check("q.sh:FFTT")),  # two facts
        _node("n2", _check("q.sh:FFFF"), _check("q.sh:FFFF")),  # one fact, seen before
        _node("n3", _check("q.sh:TFFF"), _check("q.sh:FTFF", passed=False)),  # one earns
        _node("n4", _check("q.sh:FFTT"), _check("q.sh:TTTF"), _check("q.sh:TTTF")),
        _node("n5", _check("d.tsv:TTTT", discriminating=False)),  # earns nothing
    ]}
    two, repeated, nodes = evidence_nodes(attempt)
    assert nodes == 5
    assert two == 2  # n1, n4 (n2's two checks are one fact; n3's second did not pass)
    assert repeated == 2  # n2 repeats n1's FFFF, n4 repeats n1's FFTT


def test_evidence_nodes_without_strength_a_fact_is_the_command():
    same = {"name": "c", "kind": "range", "command": "test  1 = 1", "passed": True}
    reworded = same | {"command": "test 1 =  1"}  # whitespace aside: one fact
    attempt = {"steps": [_node("n1", same), _node("n2", reworded)]}
    assert evidence_nodes(attempt) == (0, 1, 2)


def _dump_row(step: int, episode: int, group: int, task: str, *, verification: float = 0.0,
              correctness: float | None = None, penalty: float = 0.0, correct: bool = False,
              trained: bool = True, redrawn: bool = False) -> dict:
    return {"step": step, "episode": episode, "group": group, "task_id": task,
            "correct": correct, "trained": trained, "redrawn": redrawn,
            "reward_parts": {"verification": verification, "correctness": correctness,
                             "penalty": penalty}}


@pytest.fixture
def dump(tmp_path):
    rows = [
        # step 0, group 0: same verification, correctness differs -> mixed, not ver-mixed;
        # two turns of episode 0 sum their verification
        _dump_row(0, 0, 0, MOTIF, verification=0.25, correct=True),  # every turn's row
        _dump_row(0, 0, 0, MOTIF, correctness=1.0, correct=True),  # holds the verdict
        _dump_row(0, 1, 0, MOTIF, verification=0.25, correctness=0.0),
        # step 0, group 1: verification differs, all wrong; one member unscorable
        _dump_row(0, 2, 1, GC, verification=0.5, correctness=0.0),
        _dump_row(0, 3, 1, GC, verification=0.0, correctness=0.0),
        _dump_row(0, 4, 1, GC, verification=0.9, trained=False),
        # step 1, group 2: replaced by a redraw (all equal)
        _dump_row(1, 5, 2, GC, correctness=0.0, trained=False, redrawn=True),
        _dump_row(1, 6, 2, GC, correctness=0.0, trained=False, redrawn=True),
        # step 2: outside the chunk
        _dump_row(2, 7, 3, GC, verification=1.0),
    ]
    path = tmp_path / "rollouts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_training_groups_counts_verification_mixed_and_zero_std_under_the_weights(dump):
    default = training_groups(dump, 0, 2)
    assert default["episodes"] == 7 and default["groups"] == 3 and default["right"] == 1
    assert default["mixed"] == 1 and default["all_wrong"] == 2 and default["all_right"] == 0
    assert default["verification_mixed"] == 1  # group 1 (its unscorable 0.9 left out)
    assert default["zero_std"] == 1  # the redrawn group; group 0 differs in correctness
    assert default["redrawn"] == 1
    assert default["per_type"] == {"seq.gc_content": "0/5", "seq.motif_count": "1/2"}
    verification_only = training_groups(dump, 0, 2, (1.0, 0.0, 1.0))
    assert verification_only["zero_std"] == 2  # group 0 now has no advantage
    assert verification_only["verification_mixed"] == 1


def test_training_groups_missing_dump_is_empty(tmp_path):
    empty = training_groups(tmp_path / "none.jsonl", 0, 5)
    assert empty["episodes"] == empty["groups"] == empty["zero_std"] == 0


def test_step_log_copies_the_chunks_steps_and_their_keys(tmp_path):
    curve = tmp_path / "curve.jsonl"
    rows = [{"step": s, "reward": 0.1 * s, "reward_default": 0.2 * s,
             "frac_reward_zero_std": 0.5, "rewards/verification_reward/std": 0.01 * s,
             "env/correct": 0.75, "learning_rate": 5e-5} for s in (1, 2, 3)]
    rows.append({"step": 3, "train_runtime": 9.0})  # the closing summary: no reward
    curve.write_text("".join(json.dumps(r) + "\n" for r in rows))
    logged = step_log(curve, 1, 3)
    assert [r["step"] for r in logged] == [2, 3]
    assert logged[0] == {"step": 2, "reward": 0.2, "reward_default": 0.4,
                         "frac_reward_zero_std": 0.5,
                         "rewards/verification_reward/std": 0.02, "env/correct": 0.75}
    assert step_log(tmp_path / "gone.jsonl", 0, 3) == []


def test_adapter_points_sft_then_each_grpo_adapter_on_top(tmp_path):
    import learning_curve as lc

    with pytest.raises(SystemExit, match="no adapter in"):
        lc.adapter_points(tmp_path)
    for name in ("sft", "grpo_40", "grpo_20", "grpo_x"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "adapter_config.json").write_text("{}")
    (tmp_path / "grpo_60").mkdir()  # no adapter in it: not a point
    sft = tmp_path / "sft"
    assert lc.adapter_points(tmp_path) == [(0, (sft,)), (20, (sft, tmp_path / "grpo_20")),
                                           (40, (sft, tmp_path / "grpo_40"))]


def test_columns_include_the_evidence_shares_with_intervals():
    import learning_curve as lc

    from vera_env.rollout import Attempt

    attempt = Attempt.from_json(json.dumps({"task_id": MOTIF, "status": "ok", "steps": [
        _node("n1", _check("q.sh:FFFF"), _check("q.sh:FFTT")),
        _node("n2", _check("q.sh:FFFF"))]}))
    cols = lc.columns([attempt])
    assert cols["two_earning_node_share"]["mean"] == pytest.approx(0.5)
    assert cols["repeated_evidence_node_share"]["mean"] == pytest.approx(0.5)
    assert set(lc.COLUMNS) <= set(cols)
