"""run_episode, run_many and the Attempt record, with scripted policies."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from vera_env.env import VeraEnv
from vera_env.errors import PolicyError, SandboxError
from vera_env.policies import OraclePolicy, ScriptedPolicy, careless_policy
from vera_env.rollout import Attempt, arun_many, run_episode, run_many
from vera_env.tasks import load_tasks
from vera_env.verification.rewards import RewardConfig
from vera_env.wrappers import ForcedAnswer

NO_STRENGTH = RewardConfig(strength=False)

NODE = ('<command>wc -l alcohol.txt</command>\nNODE kind=load summary="5 lines"\n'
        'CHECK range "5 lines" :: test $(wc -l < alcohol.txt) -eq 5 && echo True || echo False')


class _Failing:
    def act(self, observation, info):
        raise PolicyError("connection refused by 127.0.0.1:9")


def test_run_episode_ok_records_answer_steps_and_counts(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=5)
    attempt = run_episode(env, ScriptedPolicy([NODE, "FINAL ANSWER: 5"]), seed=3)
    env.close()
    assert attempt.status == "ok" and attempt.correct is True and attempt.answer == "5"
    assert attempt.n_steps == 2 and attempt.n_nodes == 1 and attempt.n_checks == 1
    assert attempt.score == pytest.approx(1.0 + attempt.verification_reward)
    assert attempt.mean_rho == 1.0 and attempt.seed == 3 and attempt.task_id == "alcohol-mean"
    assert attempt.steps[0].node is not None and attempt.steps[0].node.id == "n1"


def test_policy_transport_failure_is_provider_not_wrong(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=5)
    attempt = run_episode(env, _Failing())
    env.close()
    assert attempt.status == "provider" and attempt.correct is None and attempt.score is None
    assert "connection refused" in attempt.error


def test_budget_without_answer_is_max_steps(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=2)
    attempt = run_episode(env, ScriptedPolicy(["<command>true</command>"] * 2))
    env.close()
    assert attempt.status == "max_steps" and attempt.answer == "" and attempt.correct is None


def test_no_wellformed_turn_is_format(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=2)
    attempt = run_episode(env, ScriptedPolicy(["hmm", "let me think"]))
    env.close()
    assert attempt.status == "format"


def test_forced_answer_wrapper_turns_max_steps_into_answer(alcohol_task):
    env = ForcedAnswer(VeraEnv([alcohol_task], max_steps=3), reserve=1)
    turns = ["<command>true</command>"] * 2 + ["FINAL ANSWER: 5"]
    attempt = run_episode(env, ScriptedPolicy(turns))
    env.close()
    assert attempt.status == "ok" and attempt.correct is True


class _StageFails:
    name = "broken"

    def stage(self, files):
        raise SandboxError("bwrap: setting up uid map: Permission denied")

    def close(self):
        pass


def test_staging_failure_is_sandbox_status_and_unscorable(alcohol_task):
    env = VeraEnv([alcohol_task], sandbox=_StageFails())
    attempt = run_episode(env, ScriptedPolicy(["FINAL ANSWER: 5"]))
    assert attempt.status == "sandbox" and attempt.unscorable and attempt.score is None
    assert "uid map" in attempt.error


def test_attempt_round_trips_through_one_json_line(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=5)
    attempt = run_episode(env, ScriptedPolicy([NODE, "FINAL ANSWER: 5"]))
    env.close()
    line = attempt.to_json()
    assert "\n" not in line
    assert Attempt.from_json(line) == attempt


def test_attempt_from_json_rejects_unknown_status_and_fields():
    with pytest.raises(ValueError, match="status"):
        Attempt.from_json(json.dumps({"task_id": "t", "status": "great"}))
    with pytest.raises(ValueError, match="not an Attempt"):
        Attempt.from_json(json.dumps({"task_id": "t", "status": "ok", "bogus": 1}))


def test_run_many_bounded_concurrency_keeps_job_order():
    tasks = load_tasks("builtin")
    ids = [t.id for t in tasks]
    in_flight = []
    peak = []
    lock = threading.Lock()

    class Counting(OraclePolicy):
        def act(self, observation, info):
            with lock:
                in_flight.append(1)
                peak.append(len(in_flight))
            try:
                return super().act(observation, info)
            finally:
                with lock:
                    in_flight.pop()

    done = []  # order and the bound are the point: strength's own tests cover its verdicts
    attempts = run_many(lambda: VeraEnv(tasks, max_steps=20, reward=NO_STRENGTH), Counting(tasks),
                        [(i, 0) for i in ids], concurrency=2, on_done=done.append)
    assert [a.task_id for a in attempts] == ids
    assert all(a.correct for a in attempts) and len(done) == len(ids)
    assert max(peak) <= 2
    with pytest.raises(ValueError, match="concurrency"):
        run_many(lambda: None, None, [], concurrency=0)


def test_arun_many_on_turn_comes_before_each_turn_is_asked_on_step_after(alcohol_task):
    """``vera-env eval`` of a CPU checkpoint showed nothing while its first turn was
    generated: the display needs a call before the policy answers, not only after."""
    events: list[str] = []

    class Recording(ScriptedPolicy):
        def act(self, observation, info):
            events.append("act")
            return super().act(observation, info)

    asyncio.run(arun_many(lambda: VeraEnv([alcohol_task], max_steps=5),
                          Recording([NODE, "FINAL ANSWER: 5"]), [(None, 0)],
                          on_turn=lambda a: events.append(f"turn {len(a.steps) + 1}"),
                          on_step=lambda a: events.append(f"step {len(a.steps)}")))
    assert events == ["turn 1", "act", "step 1", "turn 2", "act", "step 2"]


def test_scripted_policy_picks_turn_by_step_and_task():
    policy = ScriptedPolicy({"a": ["x", "y"]}, when_done="z")
    assert policy.act("", {"task_id": "a", "step": 1}) == "y"
    assert policy.act("", {"task_id": "a", "step": 5}) == "z"
    with pytest.raises(KeyError, match="no script"):
        policy.act("", {"task_id": "b", "step": 0})
    with pytest.raises(ValueError):
        ScriptedPolicy([])


def test_careless_policy_falls_into_every_trap():
    tasks = load_tasks("builtin")
    env = VeraEnv(tasks, max_steps=20, reward=NO_STRENGTH)  # the answer is the point
    careless = careless_policy(tasks)
    for task in tasks:
        attempt = run_episode(env, careless, task_id=task.id)
        assert attempt.answer == task.trap.wrong_answer and attempt.correct is False
    env.close()


def test_attempt_with_lone_surrogates_still_writes_one_utf8_json_line():
    """Issue 11: an undecodable byte in an action or an error made results.jsonl unwritable."""
    attempt = Attempt.start("t", seed=0)
    with attempt.capturing():
        attempt.add_step("FINAL ANSWER: x\udcff\u2028", "obs", 0.0, False, False,
                         {"step": 1, "error": "", "node": {}, "checks": []})
        raise FileNotFoundError("no file 'x\udcff.tsv'")
    attempt.finish()
    line = attempt.to_json()
    assert len(line.encode("utf-8").decode("utf-8").splitlines()) == 1
    back = Attempt.from_json(line)
    assert back.steps[0].action == "FINAL ANSWER: x\\xff\u2028"
    assert back.status == "error" and "x\\xff.tsv" in back.error
    assert "(at test_rollout.py:" in back.error  # where the bug raised
