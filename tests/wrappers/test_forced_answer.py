"""ForcedAnswer: the last steps demand an answer; one more ask after the budget."""

from __future__ import annotations

import pytest

from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.policy import OraclePolicy
from vera_env.tasks import load_tasks
from vera_env.wrappers import EmissionGate, ForcedAnswer
from vera_env.wrappers.forced_answer import PREFILL

IDLE = "<command>true</command>"


@pytest.fixture
def make(alcohol_task):
    envs = []

    def build(max_steps=5, reserve=2):
        env = ForcedAnswer(VeraEnv([alcohol_task], max_steps=max_steps), reserve=reserve)
        envs.append(env)
        return env

    yield build
    for env in envs:
        env.close()


def test_reserve_larger_than_budget_is_a_value_error(alcohol_task):
    with pytest.raises(ValueError, match="larger than the step budget"):
        ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve=3)
    with pytest.raises(ValueError, match="positive int"):
        ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve=0)
    with pytest.raises(ValueError, match="positive int, got True"):
        ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve=True)
    with pytest.raises(ValueError, match="positive int, got '2'"):
        ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve="2")


def test_the_forced_prompt_asks_the_question_says_why_and_why_a_reply_was_refused(
        make, alcohol_task):
    env = make(max_steps=3, reserve=2)
    obs, _ = env.reset(seed=0)
    obs, *_, info = env.step(IDLE)
    assert info[keys.FORCING]
    assert f"QUESTION: {alcohol_task.question}" in obs
    assert "STOP INVESTIGATING. You have used 1 of 3 steps." in obs and "NOTE:" not in obs
    obs, *_, info = env.step("FINAL ANSWER: awk '{print $2}' alcohol.txt")
    assert info[keys.NUDGE] and f"NOTE: {info[keys.NUDGE]}" in obs


def test_reset_options_reach_the_env_and_the_spec_keeps_reserve(alcohol_task):
    import gymnasium as gym

    import vera_env  # noqa: F401  (registers the env id)

    env = ForcedAnswer(gym.make("vera_env/Vera-v0", tasks=[alcohol_task], max_steps=4),
                       reserve=2)
    assert env.spec.additional_wrappers[-1].kwargs == {"reserve": 2}
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(seed=0, options={"task": "alcohol-mean"})
    env.close()


def test_forcing_starts_in_last_reserve_steps_with_prefill(make):
    env = make(max_steps=5, reserve=2)
    obs, info = env.reset(seed=0)
    assert not info[keys.FORCING] and info[keys.PREFILL] == ""
    obs, *_, info = env.step(IDLE)
    obs, *_, info = env.step(IDLE)
    assert not info[keys.FORCING]
    obs, *_, info = env.step(IDLE)  # 3 of 5 used: 2 left = reserve
    assert info[keys.FORCING] and info[keys.PREFILL] == PREFILL
    assert "STOP INVESTIGATING" in obs and "<command>" not in obs


def test_forced_step_runs_no_command_and_records_no_node(make):
    env = make(max_steps=3, reserve=3)
    env.reset(seed=0)
    _, _, term, _, info = env.step(
        '<command>touch made.txt</command>\nNODE kind=load summary="x"\n'
        'CHECK range "r" :: echo True')
    assert not term and info[keys.COMMAND_OUTPUT] == "" and info[keys.NODE] == {}
    assert not (env.unwrapped.workspace.path / "made.txt").exists()
    assert "not usable" in info[keys.ERROR]


def test_forced_reply_that_is_a_command_is_refused_then_answer_released(make):
    env = make(max_steps=3, reserve=3)
    env.reset(seed=0)
    _, _, term, _, info = env.step("FINAL ANSWER: awk -F'\\t' 'NR>1{print $2}' alcohol.txt | head -5")
    assert not term and info[keys.FORCING] and "not usable" in info[keys.NUDGE]
    _, reward, term, _, info = env.step(PREFILL + "5")
    assert term and info[keys.ANSWER] == "5" and info[keys.CORRECT] is True and reward == 1.0


def test_answer_in_think_block_is_not_mined(make):
    env = make(max_steps=2, reserve=2)
    env.reset(seed=0)
    _, _, term, _, info = env.step("<think>FINAL ANSWER: 5</think> let me check more")
    assert not term and info[keys.ANSWER] == ""


def test_budget_end_without_answer_asks_once_more_and_marks_forced(make):
    env = make(max_steps=3, reserve=1)
    env.reset(seed=0)
    env.step(IDLE)
    env.step(IDLE)
    obs, _, term, trunc, info = env.step(PREFILL)  # last forced step: empty continuation
    assert not term and not trunc and info[keys.FORCING]
    assert "STOP INVESTIGATING. Your step budget is exhausted." in obs
    _, reward, term, trunc, info = env.step(PREFILL + "5.0")
    assert term and not trunc and info[keys.ANSWER_FORCED] is True
    assert info[keys.CORRECT] is True and info[keys.STEP] == 3


def test_second_failed_extra_ask_truncates(make):
    env = make(max_steps=1, reserve=1)
    env.reset(seed=0)
    env.step("no idea")
    _, _, term, trunc, info = env.step("still no idea")
    assert trunc and not term and info[keys.ANSWER] == ""


def test_answer_on_the_very_last_step_terminates_without_extra_ask(make):
    env = make(max_steps=2, reserve=1)
    env.reset(seed=0)
    env.step(IDLE)
    _, _, term, trunc, info = env.step(PREFILL + "5")
    assert term and not trunc and info[keys.ANSWER_FORCED] is False


def test_reset_clears_the_extra_ask(make):
    env = make(max_steps=1, reserve=1)
    env.reset(seed=0)
    env.step("nothing")
    env.reset(seed=0)
    _, info = env.reset(seed=0)
    assert info[keys.FORCING]


def test_extra_ask_is_offered_again_in_the_next_episode(make):
    """The one extra ask belongs to an episode: the next episode on the same env gets its
    own (a flag that outlived ``reset`` left every later episode of a long-lived env —
    a vector or Ray worker — without it)."""
    env = make(max_steps=1, reserve=1)
    for _ in range(2):
        env.reset(seed=0)
        obs, _, term, trunc, info = env.step("no idea")
        assert (term, trunc) == (False, False) and "budget is exhausted" in obs
        _, _, term, trunc, info = env.step(PREFILL + "5")
        assert term and info[keys.ANSWER_FORCED] is True and info[keys.CORRECT] is True


# ----- render() shows what the model saw -----

STACKS = {
    "forced": lambda env: ForcedAnswer(env, reserve=2),
    "gate,forced": lambda env: ForcedAnswer(EmissionGate(env), reserve=2),
}


def _play_checking_render(env, act, *, task_id=None):
    """Play one episode; after ``reset`` and every ``step``, ``render()`` must equal the
    observation just returned. Returns the observations, reset's first."""
    obs, info = env.reset(seed=0, options={"task_id": task_id} if task_id else None)
    seen = [obs]
    assert env.render() == obs
    for _ in range(50):
        obs, _, term, trunc, info = env.step(act(obs, info))
        seen.append(obs)
        assert env.render() == obs, f"step {len(seen) - 1}: render() differs from the obs"
        if term or trunc:
            return seen
    raise AssertionError("the episode did not end")


@pytest.mark.parametrize("stack", sorted(STACKS))
@pytest.mark.parametrize("task_id", ["tab.sentinel_mean.easy.s0", "vcf.titv.easy.s0"])
def test_oracle_episode_under_forced_answer_renders_every_observation_it_returned(
        stack, task_id):
    tasks = load_tasks("builtin")
    env = STACKS[stack](VeraEnv(tasks, max_steps=12, render_mode="ansi"))
    oracle = OraclePolicy(tasks)
    seen = _play_checking_render(env, oracle.act, task_id=task_id)
    env.close()
    assert len(seen) > 2 and "Emit your next block." in seen[-1]


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_looping_episode_renders_the_forced_prompts_and_the_extra_ask_it_returned(
        alcohol_task, stack):
    env = STACKS[stack](VeraEnv([alcohol_task], max_steps=4, render_mode="ansi"))
    turns = iter([IDLE, IDLE, IDLE, "FINAL ANSWER: awk '{print $2}' alcohol.txt", IDLE])
    seen = _play_checking_render(env, lambda obs, info: next(turns))
    env.close()
    forced = [obs for obs in seen if "STOP INVESTIGATING. You have used" in obs]
    assert len(forced) == 2 and "Emit your next block." not in "".join(forced)
    assert "NOTE: your last turn was rejected" in forced[1]
    assert "STOP INVESTIGATING. Your step budget is exhausted." in seen[-2]


def test_episode_forced_from_reset_renders_the_forced_prompt_it_returned(alcohol_task):
    env = ForcedAnswer(VeraEnv([alcohol_task], max_steps=1, render_mode="ansi"), reserve=1)
    seen = _play_checking_render(env, lambda obs, info: PREFILL + "5")
    env.close()
    assert "STOP INVESTIGATING. You have used 0 of 1 steps." in seen[0] and len(seen) == 2


# ----- the env forces; the wrapper is its switch -----

def test_forced_steps_render_their_observation_once(alcohol_task, monkeypatch):
    """The env moves the phase before it renders: a wrapper that forced after ``step``
    returned re-entered the env, and each forced step was rendered twice."""
    calls = []
    observe = VeraEnv.observe
    monkeypatch.setattr(VeraEnv, "observe", lambda self: calls.append(1) or observe(self))
    env = ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve=2)
    env.reset(seed=0)
    assert len(calls) == 1
    _, _, term, trunc, info = env.step(IDLE)  # forced from reset: refused, budget left
    assert (term, trunc, info[keys.FORCING]) == (False, False, True) and len(calls) == 2
    _, _, term, trunc, info = env.step(IDLE)  # the budget ends: the extra ask
    assert (term, trunc, info[keys.FORCING]) == (False, False, True) and len(calls) == 3
    env.close()


def test_bare_env_with_forced_reserve_plays_as_under_the_wrapper(alcohol_task):
    def play(env):
        out = [env.reset(seed=0)]
        out += [env.step(turn) for turn in (IDLE, IDLE, IDLE, PREFILL + "5")]
        env.close()
        return out

    out = play(VeraEnv([alcohol_task], max_steps=3, forced_reserve=1))
    assert out == play(ForcedAnswer(VeraEnv([alcohol_task], max_steps=3), reserve=1))
    assert [o[-1][keys.FORCING] for o in out] == [False, False, True, True, False]
    assert out[-1][2] is True and out[-1][-1][keys.ANSWER_FORCED] is True


def test_forced_reserve_is_checked_when_set_and_switched_off_on_close(alcohol_task):
    base = VeraEnv([alcohol_task], max_steps=2)
    with pytest.raises(ValueError, match="forced_reserve must be an int from 0 to max_steps=2"):
        base.forced_reserve = 3
    with pytest.raises(ValueError, match="got True"):
        VeraEnv([alcohol_task], max_steps=2, forced_reserve=True)
    env = ForcedAnswer(base, reserve=2)
    assert base.forced_reserve == 2
    env.close()
    assert base.forced_reserve == 0


def test_spec_builds_the_env_with_its_clipped_reserve_only_under_forced():
    from vera_env.spec import EnvSpec

    assert EnvSpec(max_steps=2, wrappers=("forced",), reserve=3).forced_reserve == 2
    assert EnvSpec(max_steps=9, wrappers=("gate",), reserve=3).forced_reserve == 0
    assert "forced_reserve" not in EnvSpec().model_dump()  # derived: --resume compares fields
