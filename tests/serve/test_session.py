"""VeraSession: step results as wire fields; unscorable is None, never 0; closed is closed."""

from __future__ import annotations

import pytest

from vera_env import info as keys
from vera_env.errors import ResetNeeded
from vera_env.serve.session import SessionClosed, VeraSession
from vera_env.spec import EnvSpec
from vera_env.tasks import Task

NODE = ('<command>wc -l alcohol.txt</command>\nNODE kind=load summary="5 lines"\n'
        'CHECK range "5 lines" :: test $(wc -l < alcohol.txt) -eq 5 && echo True || echo False')


def session_on(*tasks: Task) -> VeraSession:
    return VeraSession(lambda: EnvSpec(max_steps=4, wrappers=()).build(tasks=list(tasks)))


def test_session_turn_fields_carry_every_info_key_and_the_return(alcohol_task):
    session = session_on(alcohol_task)
    first = session.reset(task_id="alcohol-mean")
    node = session.step(NODE)
    end = session.step("FINAL ANSWER: 5.0")
    session.close()
    assert first.reward is None and first.fields()["text"] == first.text
    assert set(keys.INFO_KEYS) | {"text", "terminated", "truncated"} == set(end.fields())
    assert end.done and end.info[keys.CORRECT] is True
    assert end.episode_return == pytest.approx(node.reward + end.reward)
    with pytest.raises(SessionClosed, match="closed by the client"):
        session.step("FINAL ANSWER: 5.0")


def test_session_unscorable_step_reward_and_return_are_none(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("5\n")
    judged = Task(id="judged", question="What number?", answer="5",
                  grader={"kind": "llm", "rubric": "Score 1.0 if 5."}, data_dir=data)
    session = session_on(judged)  # no judge: an llm-graded answer is unscorable
    session.reset(task_id="judged")
    end = session.step("FINAL ANSWER: 5")
    session.close()
    assert end.unscorable and end.done
    assert end.reward is None and end.episode_return is None


def test_session_step_before_reset_or_after_the_end_needs_reset(alcohol_task):
    session = session_on(alcohol_task)
    with pytest.raises(ResetNeeded, match="reset first"):
        session.step("<command>ls</command>")
    session.reset(task_id="alcohol-mean")
    session.step("FINAL ANSWER: 5.0")
    with pytest.raises(ResetNeeded):
        session.step("<command>ls</command>")
    assert session.reset(task_id="alcohol-mean").info[keys.STEP] == 0
    session.close()
    assert not session.close()  # idempotent
