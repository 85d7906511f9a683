"""The rollout dump file and the printed sample episodes."""

from __future__ import annotations

import json

from vera_env.training.dump import RolloutDump, format_episode


def record(turn: int, **kw):
    base = {"episode": 3, "group": 0, "task_id": "t", "advantage": 0.5, "turn": turn,
            "observation": "QUESTION: q " + "x" * 900 + " Your turn:", "prefill": "",
            "completion": "<command>ls</command>", "reward": -0.02, "error": "",
            "reward_parts": {"verification": 0.0, "correctness": None, "penalty": 0.02}}
    return {**base, **kw}


def test_rollout_dump_starts_empty_and_appends_json_lines(tmp_path):
    path = tmp_path / "deep" / "dump.jsonl"
    path.parent.mkdir()
    path.write_text("stale\n")
    dump = RolloutDump(path)
    assert path.read_text() == ""
    dump.write([record(0), record(1)])
    dump.write([record(0, episode=4)])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["episode"], r["turn"]) for r in lines] == [(3, 0), (3, 1), (4, 0)]


def test_format_episode_shows_turns_rewards_and_rejections():
    text = format_episode([record(0, error="no block"), record(1, prefill="FINAL ANSWER: ",
                                                              completion="7")])
    assert text.startswith("=== episode 3 (group 0, t, advantage 0.5) ===")
    assert "rejected: no block" in text and "prefill 'FINAL ANSWER: '" in text
    assert "Your turn:" in text and "x" * 700 not in text  # the observation's tail only
    assert format_episode([]) == "(no turns)"
