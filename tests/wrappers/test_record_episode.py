"""RecordEpisode writes a transcript, the graph and the answer of each episode."""

from __future__ import annotations

import json

from vera_env.env import VeraEnv
from vera_env.wrappers import RecordEpisode

NODE = ('<command>wc -l alcohol.txt</command>\nNODE kind=load summary="5 lines in alcohol.txt"\n'
        'CHECK range "5 lines" :: test $(wc -l < alcohol.txt) -eq 5 && echo True || echo False')


def test_record_writes_transcript_graph_and_answer(alcohol_task, tmp_path):
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path / "runs")
    env.reset(seed=0)
    env.step(NODE)
    env.step("FINAL ANSWER: 5")
    folder = env.episode_dir
    lines = [json.loads(x) for x in (folder / "transcript.jsonl").read_text().splitlines()]
    assert [x["event"] for x in lines] == ["reset", "step", "step"]
    assert lines[1]["node"]["id"] == "n1" and lines[1]["checks"][0]["passed"] is True
    assert "5 alcohol.txt" in lines[1]["command_output"]
    assert lines[2]["terminated"] is True and lines[2]["correct"] is True
    assert "5 lines in alcohol.txt" in (folder / "graph.txt").read_text()
    assert (folder / "final_answer.txt").read_text() == "5"
    env.close()


def test_unfinished_episode_is_written_on_reset_and_close(alcohol_task, tmp_path):
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path)
    env.reset(seed=0)
    first = env.episode_dir
    env.step(NODE)
    env.reset(seed=1)
    assert (first / "graph.txt").exists() and (first / "final_answer.txt").read_text() == ""
    second = env.episode_dir
    env.close()
    assert second != first and (second / "graph.txt").read_text() == "(no nodes yet)\n"


def test_record_inside_forced_answer_keeps_the_extra_ask_answer(alcohol_task, tmp_path):
    """Inside ``ForcedAnswer`` the record sees the budget end as truncation, then the
    extra ask's answer: ``final_answer.txt`` was left empty and the answer's step lost."""
    from vera_env.wrappers import ForcedAnswer
    from vera_env.wrappers.forced_answer import PREFILL

    env = ForcedAnswer(RecordEpisode(VeraEnv([alcohol_task], max_steps=1), tmp_path),
                       reserve=1)
    env.reset(seed=0)
    _, _, term, trunc, _ = env.step("no idea yet")
    assert (term, trunc) == (False, False)
    _, _, term, _, info = env.step(PREFILL + "5")
    assert term and info["answer_forced"] is True
    folder = env.env.episode_dir
    assert (folder / "final_answer.txt").read_text() == "5"
    lines = [json.loads(x) for x in (folder / "transcript.jsonl").read_text().splitlines()]
    assert [x["event"] for x in lines] == ["reset", "step", "step"]
    assert lines[1]["truncated"] is True and lines[2]["answer"] == "5"
    env.close()
    assert (folder / "final_answer.txt").read_text() == "5"

def test_record_writes_an_action_with_lone_surrogates_as_one_utf8_line(alcohol_task, tmp_path):
    """A server's JSON can decode to a lone surrogate; the transcript must stay writable."""
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path)
    env.reset(seed=0)
    _, _, _, _, info = env.step("FINAL ANSWER: 5\udcff\u2028")
    assert "U+DCFF" in info["error"]
    env.close()
    lines = (env.episode_dir / "transcript.jsonl").read_bytes().decode("utf-8").splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["action"] == "FINAL ANSWER: 5\\xff\u2028"
