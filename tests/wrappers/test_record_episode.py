"""RecordEpisode writes a transcript, the graph and the answer of each episode."""

from __future__ import annotations

import json

import pytest

from vera_env.env import VeraEnv
from vera_env.wrappers import RecordEpisode

NODE = ('<command>wc -l alcohol.txt</command>\nNODE kind=load summary="5 lines in alcohol.txt"\n'
        'CHECK range "3 valid rows" :: test $(awk -F\'\\t\' \'NR>1 && $3!=-999\' alcohol.txt'
        ' | wc -l) -eq 3 && echo True || echo False')


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
    assert (second / "final_answer.txt").read_text() == ""  # an episode with no step


def test_record_inside_forced_answer_keeps_the_extra_ask_answer(alcohol_task, tmp_path):
    """Inside ``ForcedAnswer`` the record keeps the extra ask's answer (``final_answer.txt``
    was once left empty and the answer's step lost), and records what the outside sees:
    the env grants the extra ask itself, so the budget's end is no truncation there."""
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
    assert lines[1]["truncated"] is False and lines[1]["forcing"] is True
    assert lines[2]["answer"] == "5"
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


def test_episode_folders_are_numbered_after_what_the_directory_holds(alcohol_task, tmp_path):
    """Folders count up from the entries already there, so a second run in the same
    directory adds folders instead of overwriting the first run's."""
    runs = tmp_path / "runs"
    (runs / "00000-earlier").mkdir(parents=True)
    nested = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path / "new" / "deep")
    nested.reset(seed=0)
    nested.close()
    assert nested.episode_dir == tmp_path / "new" / "deep" / "00000-alcohol-mean"
    (runs / "notes.txt").write_text("kept")
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), runs)
    env.reset(seed=0)
    first = env.episode_dir
    env.reset(seed=1)
    second = env.episode_dir
    env.close()
    assert (first.name, second.name) == ("00002-alcohol-mean", "00003-alcohol-mean")
    assert (runs / "notes.txt").read_text() == "kept"


def test_a_task_id_becomes_a_safe_clipped_folder_name(tmp_path):
    from vera_env.tasks.model import Task

    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("1\n")
    task_id = "..Odd:ID+" + "é" * 3 + "x" * 100
    task = Task(id=task_id, question="q?", answer="1", grader={"kind": "exact"}, data_dir=data)
    env = RecordEpisode(VeraEnv([task], max_steps=2), tmp_path / "runs")
    env.reset(seed=0)
    env.close()
    name = env.episode_dir.name
    assert env.episode_dir.parent == tmp_path / "runs"
    assert name == "00000-" + ("..Odd_ID_" + "x" * 100)[:80]


def test_folder_for_chooses_the_folder_and_replaces_a_partial_one(alcohol_task, tmp_path):
    """An evaluation resumes a killed attempt in the same folder: what the killed attempt
    left there is removed, not mixed into the new transcript."""
    asked = []

    def folder_for(task_id, seed):
        asked.append((task_id, seed))
        return tmp_path / "transcripts" / task_id / str(seed) / "attempt"

    partial = tmp_path / "transcripts" / "alcohol-mean" / "3" / "attempt"
    partial.mkdir(parents=True)
    (partial / "stale.txt").write_text("from the killed attempt")
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path / "runs", folder_for)
    env.reset(seed=3)
    env.step("FINAL ANSWER: 5")
    env.close()
    assert asked == [("alcohol-mean", 3)] and env.episode_dir == partial
    assert sorted(p.name for p in partial.iterdir()) == ["final_answer.txt", "graph.txt",
                                                         "transcript.jsonl"]
    assert list((tmp_path / "runs").iterdir()) == []
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path / "runs", folder_for)
    env.reset(seed=4)  # a folder whose parents do not exist yet
    env.close()
    assert env.episode_dir == tmp_path / "transcripts" / "alcohol-mean" / "4" / "attempt"


def test_transcript_lines_hold_what_the_env_returned(alcohol_task, tmp_path):
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path)
    obs0, _ = env.reset(seed=7, options={"task_id": "alcohol-mean"})
    obs1, reward, _, _, _ = env.step(NODE)
    env.close()
    reset, step = [json.loads(x) for x in
                   (env.episode_dir / "transcript.jsonl").read_text().splitlines()]
    assert reset["seed"] == 7 and reset["observation"] == obs0
    assert reset["task_id"] == "alcohol-mean"
    assert step["action"] == NODE and step["observation"] == obs1
    assert step["reward"] == reward and reward > 0


def test_reset_options_reach_the_env(alcohol_task, tmp_path):
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"task": "alcohol-mean"})
    env.close()


def test_closing_twice_is_safe_and_writes_the_outcome_once(alcohol_task, tmp_path):
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path)
    env.reset(seed=0)
    env.step(NODE)
    env.close()
    env.close()
    assert "5 lines in alcohol.txt" in (env.episode_dir / "graph.txt").read_text()


def test_an_episode_closed_underneath_is_recorded_as_graph_unavailable(alcohol_task, tmp_path):
    """If the env's episode is gone when the record closes (closed underneath it), the
    record says so in graph.txt instead of raising or writing nothing."""
    env = RecordEpisode(VeraEnv([alcohol_task], max_steps=4), tmp_path)
    env.reset(seed=0)
    env.unwrapped.close()
    env.close()
    graph = (env.episode_dir / "graph.txt").read_text()
    assert graph.startswith("(graph unavailable: ResetNeeded: ") and graph.endswith(")\n")


def test_the_wrapper_spec_records_its_directory(alcohol_task, tmp_path):
    """``gym.make`` rebuilds wrapped envs from their spec: the directory must be in it."""
    import gymnasium as gym

    import vera_env  # noqa: F401  (registers the env id)

    base = gym.make("vera_env/Vera-v0", tasks=[alcohol_task], max_steps=2)
    env = RecordEpisode(base, tmp_path / "runs")
    assert env.spec.additional_wrappers[-1].kwargs == {"directory": str(tmp_path / "runs")}
    env.close()
