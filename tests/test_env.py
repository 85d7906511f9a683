"""VeraEnv end to end, in the real sandbox."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import vera_env
from vera_env import info as keys
from vera_env.env import GATE_NUDGE, VeraEnv
from vera_env.errors import ResetNeeded, SandboxError
from vera_env.sandbox import SandboxLimits
from vera_env.tasks import Task
from vera_env.verification.rewards import RewardConfig

GOOD_NODE = (
    "<command>awk -F'\\t' 'NR>1 && $3!=-999 {s+=$3;n++} END{print s/n}' alcohol.txt > mean.txt"
    "; cat mean.txt</command>\n"
    'NODE kind=transform summary="mean drinks without sentinel is 5" artifact=mean.txt\n'
    'CHECK range "mean is 5" :: test "$(cat mean.txt)" = 5 && echo True || echo False\n'
    'CHECK conservation "3 valid rows" :: test $(awk -F\'\\t\' \'NR>1 && $3!=-999\' alcohol.txt'
    ' | wc -l) -eq 3 && echo True || echo False\n'
)


@pytest.fixture
def env(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=6)
    yield env
    env.close()


def test_registered_id_makes_env_and_check_env_passes_with_warnings_as_errors(alcohol_task):
    env = gym.make(vera_env.ENV_ID, tasks=[alcohol_task], max_steps=5)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped)
    finally:
        env.close()


def test_reset_observation_shows_question_files_and_protocol(env):
    obs, info = env.reset(seed=0)
    assert "Mean drinks" in obs and "- alcohol.txt" in obs and "CHECK" in obs
    assert set(keys.INFO_KEYS) <= set(info)
    assert info[keys.STEP] == 0 and info[keys.STEPS_LEFT] == 6 and info[keys.CORRECT] is None
    assert "5.0" not in obs.split("QUESTION:")[1].split("\n")[0]


def test_command_runs_and_output_reaches_the_window(env):
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("<command>wc -l alcohol.txt</command>")
    assert "5 alcohol.txt" in info[keys.COMMAND_OUTPUT]
    assert "$ wc -l alcohol.txt" in obs and "5 alcohol.txt" in obs
    assert (reward, term, trunc, info[keys.ERROR]) == (0.0, False, False, "")


def test_rejected_turn_costs_a_step_is_penalised_and_nudges(env):
    env.reset(seed=0)
    obs, reward, term, trunc, info = env.step("I think I will look at the data.")
    assert info[keys.ERROR] and info[keys.STEP] == 1
    assert reward == pytest.approx(-RewardConfig().format_penalty)
    assert "NOTE: your last turn was rejected" in obs


def test_node_with_passing_checks_earns_verification(env):
    env.reset(seed=0)
    _, reward, _, _, info = env.step(GOOD_NODE)
    assert [c["passed"] for c in info[keys.CHECKS]] == [True, True]
    assert info[keys.NODE]["id"] == "n1"
    # One piece of evidence: the mean's. (The row count of a four-row table, which the
    # controls barely move, cannot be told from a pin of the count gated on its hash,
    # so it earns nothing of its own: ``strength.fingerprints``; were it to earn, both
    # checks fail on the same mutants and would still be one piece.)
    evidence = {c["evidence"] for c in info[keys.CHECKS] if c["discriminating"]}
    assert len(evidence) == 1 and next(iter(evidence)).startswith("alcohol.txt:")
    cfg = RewardConfig()
    expected = cfg.verification_weight * (1 / cfg.checks_per_node) / cfg.max_rewarded_nodes
    assert reward == pytest.approx(expected)
    assert info[keys.REWARD_PARTS]["verification"] == pytest.approx(expected)


def test_duplicate_node_is_not_recorded_and_earns_nothing(env):
    env.reset(seed=0)
    env.step(GOOD_NODE)
    _, reward, _, _, info = env.step(GOOD_NODE)
    assert info[keys.NODE] == {} and reward == 0.0
    assert "repeats n1" in info[keys.NUDGE]
    assert len(env.state) == 1


def test_measurement_check_gets_one_rewrite_then_counts_failed(env):
    env.reset(seed=0)
    turn = ('<command>true</command>\nNODE kind=load summary="4 data rows"\n'
            'CHECK range "rows" :: tail -n +2 alcohol.txt | wc -l\n')
    _, _, _, _, info = env.step(turn)
    assert info[keys.NODE] == {} and "printed a measurement" in info[keys.NUDGE]
    _, reward, _, _, info = env.step(turn)
    assert info[keys.NODE] != {} and info[keys.CHECKS][0]["passed"] is False
    assert info[keys.CHECKS][0]["malformed"] is True and reward == 0.0


def test_checks_cannot_write_the_workspace(env):
    env.reset(seed=0)
    turn = ('<command>true</command>\nNODE kind=load summary="tamper"\n'
            'CHECK type "writes" :: echo 1 > alcohol.txt && echo True || echo False\n'
            'CHECK type "deletes" :: rm -f alcohol.txt && echo True || echo False\n')
    before = (env.workspace.path / "alcohol.txt").read_bytes()
    _, reward, _, _, info = env.step(turn)
    assert [c["passed"] for c in info[keys.CHECKS]] == [False, False]
    assert (env.workspace.path / "alcohol.txt").read_bytes() == before
    assert reward == 0.0


def test_correct_answer_terminates_with_correctness_reward(env):
    env.reset(seed=0)
    _, reward, term, trunc, info = env.step("FINAL ANSWER: 5.0")
    assert term and not trunc and info[keys.CORRECT] is True
    assert reward == pytest.approx(RewardConfig().correctness_weight)
    with pytest.raises(ResetNeeded):
        env.step("FINAL ANSWER: 5.0")


def test_wrong_answer_terminates_with_zero_correctness(env):
    env.reset(seed=0)
    _, reward, term, _, info = env.step("FINAL ANSWER: -246.0")
    assert term and info[keys.CORRECT] is False and reward == 0.0
    assert info[keys.REWARD_PARTS]["correctness"] == 0.0


def test_unusable_answer_is_refused_and_episode_continues(env):
    env.reset(seed=0)
    _, _, term, _, info = env.step("FINAL ANSWER: awk -F'\\t' 'NR>1{print $2}' alcohol.txt | head -5")
    assert not term and "not usable" in info[keys.ERROR] and info[keys.ANSWER] == ""


def test_budget_end_truncates(env):
    env.reset(seed=0)
    for _ in range(5):
        *_, term, trunc, _ = env.step("<command>true</command>")
        assert not (term or trunc)
    _, _, term, trunc, info = env.step("<command>true</command>")
    assert trunc and not term and info[keys.STEPS_LEFT] == 0


def test_answer_on_last_step_terminates_not_truncates(env):
    env.reset(seed=0)
    for _ in range(5):
        env.step("<command>true</command>")
    _, _, term, trunc, info = env.step("FINAL ANSWER: 5.0")
    assert term and not trunc and info[keys.CORRECT] is True


def test_step_before_reset_raises(alcohol_task):
    env = VeraEnv([alcohol_task])
    with pytest.raises(ResetNeeded):
        env.step("<command>ls</command>")
    env.close()


def test_non_string_action_is_a_type_error(env):
    env.reset(seed=0)
    with pytest.raises(TypeError, match="must be str"):
        env.step(42)


def test_reset_rejects_unknown_options_and_picks_task_by_id(env):
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"task": "x"})
    _, info = env.reset(options={"task_id": "alcohol-mean"})
    assert info[keys.TASK_ID] == "alcohol-mean"


class _BrokenWorkspace:
    path = Path("/nonexistent/broken-workspace")  # a Workspace has a path, even a dead one

    def run(self, command, *, timeout_s=None):
        raise SandboxError("bwrap vanished")

    run_check = run

    def listing(self):
        return []

    def close(self):
        pass


class _BrokenSandbox:
    name = "broken"

    def stage(self, files):
        return _BrokenWorkspace()

    def close(self):
        pass


def test_sandbox_fault_mid_episode_is_unscorable_not_zero(alcohol_task):
    env = VeraEnv([alcohol_task], sandbox=_BrokenSandbox())
    env.reset(seed=0)
    _, reward, term, trunc, info = env.step("<command>ls</command>")
    assert info[keys.UNSCORABLE] is True and trunc and not term
    assert "sandbox fault" in info[keys.ERROR]
    assert info[keys.REWARD_PARTS] == {"verification": 0.0, "correctness": None, "penalty": 0.0}


def test_llm_graded_task_without_judge_is_unscorable(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.txt").write_text("x")
    task = Task(id="t", question="q", answer="a", data_dir=tmp_path / "d",
                grader={"kind": "llm", "rubric": "Score 1.0 if the answer is a."})
    env = VeraEnv([task])
    env.reset(seed=0)
    _, reward, term, _, info = env.step("FINAL ANSWER: a thing")
    assert term and info[keys.UNSCORABLE] is True and info[keys.CORRECT] is None
    assert info[keys.REWARD_PARTS]["correctness"] is None
    env.close()


def test_close_removes_workspace(alcohol_task):
    env = VeraEnv([alcohol_task])
    env.reset(seed=0)
    path = env.workspace.path
    assert os.path.isdir(path)
    env.close()
    assert not os.path.exists(path)


def test_survives_thousands_of_sampled_actions(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=25)
    env.action_space.seed(7)
    obs, info = env.reset(seed=7)
    episodes = 0
    for _ in range(2000):
        obs, reward, term, trunc, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert set(keys.INFO_KEYS) <= set(info)
        if term or trunc:
            episodes += 1
            obs, info = env.reset()
    env.close()
    assert episodes > 0


def test_refused_turns_are_penalised_only_when_free(alcohol_task):
    """Penalised: a malformed free turn and an unusable free answer. Not penalised: an
    answer withheld by the gate, and a refused reply to a forced prompt."""
    from vera_env.wrappers import EmissionGate, ForcedAnswer

    penalty = RewardConfig().format_penalty
    env = ForcedAnswer(EmissionGate(VeraEnv([alcohol_task], max_steps=5)), reserve=2)
    env.reset(seed=0)
    rewards = [env.step(turn)[1] for turn in ("just thinking", "FINAL ANSWER: N/A",
                                              "FINAL ANSWER: 5", "not an answer")]
    assert rewards == pytest.approx([-penalty, -penalty, 0.0, 0.0])
    env.close()


def test_reasoning_is_stripped_once_per_turn(env):
    """A reasoning block is dropped once; the text left is the model's visible turn and
    is not re-read as reasoning (a second pass saw the tag that joining the two sides of
    a dropped block formed, ``</thi`` + ``nk>``, and dropped the command before it)."""
    env.reset(seed=0)
    _, _, _, _, info = env.step("<command>wc -l alcohol.txt</command>\n"
                                "</thi<think>draft</think>nk>")
    assert info[keys.ERROR] == "" and "5 alcohol.txt" in info[keys.COMMAND_OUTPUT]


def test_phase_api_refuses_impossible_turns(env):
    env.reset(seed=0)
    with pytest.raises(ResetNeeded, match="grant extra"):
        env.grant_extra_ask()  # budget left: there is nothing to ask again
    env.step("FINAL ANSWER: 5")
    assert env.phase == "done"
    with pytest.raises(ResetNeeded):
        env.force_answer()
    with pytest.raises(ResetNeeded):
        env.step("FINAL ANSWER: 5")


def test_budget_end_without_answer_leaves_the_episode_spent_until_reset(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=1)
    env.reset(seed=0)
    _, _, term, trunc, info = env.step("<command>true</command>")
    assert (term, trunc) == (False, True) and env.phase == "spent"
    with pytest.raises(ResetNeeded):
        env.step("FINAL ANSWER: 5")
    env.grant_extra_ask()
    _, _, term, trunc, info = env.step("FINAL ANSWER: 5")
    assert term and info[keys.ANSWER_FORCED] and info[keys.ANSWER_PHASE] == "extra"
    assert info[keys.STEP] == 1
    env.reset(seed=0)
    assert env.phase == "open"
    env.close()

UNDECODABLE = "<command>printf '3\\n' > \"$(printf 'x\\377.tsv')\"; ls</command>"


def test_undecodable_file_name_keeps_observation_and_info_utf8(env):
    """Issue 11: a file named $(printf 'x\\377.tsv') put lone surrogates into the listing."""
    env.reset(seed=0)
    obs, _, _, _, info = env.step(UNDECODABLE)
    obs.encode("utf-8")
    json.dumps(info, ensure_ascii=False, allow_nan=False).encode("utf-8")
    assert "- $'x\\xff.tsv'" in obs  # shown as bash takes it back
    _, _, _, _, info = env.step("<command>cat $'x\\xff.tsv'</command>")
    assert info[keys.COMMAND_OUTPUT] == "3"


def test_invisible_character_in_a_forced_answer_is_refused_with_the_fix(env):
    env.reset(seed=0)
    env.unwrapped.force_answer()
    _, _, term, _, info = env.step("FINAL ANSWER: 5\u200b")
    assert not term and info[keys.ANSWER] == ""
    assert "U+200B ZERO WIDTH SPACE" in info[keys.ERROR]
    assert "U+200B ZERO WIDTH SPACE" in info[keys.NUDGE]

def test_env_observation_variant_compact_reaches_forced_prompt_and_spec(alcohol_task):
    from vera_env.spec import EnvSpec

    env = EnvSpec(max_steps=2, wrappers=("forced",), reserve=1,
                  observation_variant="compact").build(tasks=[alcohol_task])
    obs, info = env.reset(seed=0)
    assert "Node kinds: load" in obs and "<kind>" not in obs
    obs, _, _, _, info = env.step("<command>ls</command>")
    assert info["forcing"] and "<answer>" not in obs and "FINAL ANSWER:" in obs
    env.close()
    with pytest.raises(ValueError, match="observation_variant must be one of"):
        VeraEnv([alcohol_task], observation_variant="small")  # type: ignore[arg-type]


# ----- what mutation testing showed untested (benchmarks/README.md, mutation section) -----

def test_a_node_records_its_kind_artifact_known_parents_command_and_step(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=6, reward=RewardConfig(strength=False))
    env.reset(seed=0)
    env.step(GOOD_NODE)
    _, _, _, _, info = env.step(
        "<command>wc -l < mean.txt</command>\n"
        'NODE kind=qc summary="one mean line" artifact=mean.txt parents=n1,n9\n'
        "CHECK range \"1 line\" :: test $(wc -l < mean.txt) -eq 1 && echo True || echo False\n")
    node = info[keys.NODE]
    assert (node["id"], node["kind"], node["artifact"], node["step"]) == ("n2", "qc",
                                                                         "mean.txt", 2)
    assert node["parents"] == ["n1"]  # n9 does not exist: dropped, not invented
    assert node["command"] == "wc -l < mean.txt"
    env.close()


def test_strength_varies_the_files_the_node_artifact_was_derived_from(alcohol_task):
    """A check that reads the artifact under a name no parser can see is traced through
    the node's ``artifact=``: without it, no task file is varied and the check earns 0."""
    def declare(artifact):
        env = VeraEnv([alcohol_task], max_steps=4)
        env.reset(seed=0)
        _, reward, _, _, info = env.step(
            "<command>awk -F'\\t' 'NR>1 && $3!=-999 {s+=$3;n++} END{print s/n}' alcohol.txt"
            f' > mean.txt</command>\nNODE kind=transform summary="mean is 5" {artifact}\n'
            'CHECK range "mean is 5" :: test "$(cat "$(printf mea)n.txt")" = 5 '
            "&& echo True || echo False\n")
        env.close()
        return reward, info[keys.CHECKS][0]["discriminating"]

    assert declare("artifact=mean.txt") == (pytest.approx(0.5 / 4 / 3), True)
    assert declare("") == (0.0, False)


def test_a_node_without_checks_is_recorded_with_a_note_that_nothing_verified_it(env):
    env.reset(seed=0)
    _, reward, _, _, info = env.step('<command>true</command>\nNODE kind=load summary="x"\n')
    assert info[keys.NODE]["id"] == "n1" and reward == 0.0
    assert "n1 has no CHECK lines, so nothing verified it" in info[keys.NUDGE]
    _, _, _, _, info = env.step(GOOD_NODE)
    assert "no CHECK lines" not in info[keys.NUDGE]


def test_each_node_summary_gets_its_own_rewrite_request(env):
    """The one rewrite a measurement check is offered is per node (by its normalised
    summary): another node of the same kind gets its own; the same summary, recased and
    respaced, does not get a second."""
    env.reset(seed=0)

    def turn(summary):
        return (f'<command>true</command>\nNODE kind=load summary="{summary}"\n'
                "CHECK range \"rows\" :: tail -n +2 alcohol.txt | wc -l\n")

    for summary in ("4 data rows", "two groups"):
        info = env.step(turn(summary))[4]
        assert info[keys.NODE] == {} and "printed a measurement" in info[keys.NUDGE]
    info = env.step(turn("4  Data ROWS"))[4]
    assert info[keys.NODE]["summary"] == "4  Data ROWS" and info[keys.CHECKS][0]["malformed"]


def test_an_action_at_the_length_limit_is_played_one_longer_is_refused_with_the_limit(
        alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=4, max_action_chars=60,
                  reward=RewardConfig(strength=False))
    env.reset(seed=0)
    at_limit = "<command>echo hi</command>".ljust(60)
    info = env.step(at_limit)[4]
    assert info[keys.ERROR] == "" and "hi" in info[keys.COMMAND_OUTPUT]
    info = env.step(at_limit + "x")[4]
    assert info[keys.ERROR] == ("your turn was 61 characters; the limit is 60. Put long "
                                "scripts in a file written by a short command")
    env.close()


def test_observation_counts_the_steps_left(env):
    obs, _ = env.reset(seed=0)
    assert "Steps left: 6." in obs
    obs = env.step("<command>true</command>")[0]
    assert "Steps left: 5." in obs


def test_render_human_prints_the_last_observation_and_ansi_returns_it(alcohol_task, capsys):
    human = VeraEnv([alcohol_task], max_steps=2, render_mode="human")
    obs, _ = human.reset(seed=0)
    assert human.render() is None and capsys.readouterr().out == obs + "\n"
    human.close()
    ansi = VeraEnv([alcohol_task], max_steps=2, render_mode="ansi")
    obs, _ = ansi.reset(seed=0)
    assert ansi.render() == obs and capsys.readouterr().out == ""
    ansi.close()


def test_observe_before_reset_is_reset_needed(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=2)
    with pytest.raises(ResetNeeded, match="call reset"):
        env.observe()
    env.close()


def test_observe_renders_the_current_phase_and_render_shows_it(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=4, render_mode="ansi")
    obs, _ = env.reset(seed=0)
    assert env.observe() == obs == env.render()
    env.step("<command>true</command>")
    env.force_answer()
    forced = env.observe()
    assert env.render() == forced and forced != obs
    assert "STOP INVESTIGATING. You have used 1 of 4 steps." in forced
    assert forced.endswith("FINAL ANSWER: <answer>") and "- alcohol.txt" not in forced
    env.close()


def test_the_extra_ask_is_rendered_as_the_exhausted_budget(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=1, render_mode="ansi", observation_variant="compact")
    env.reset(seed=0)
    env.step("<command>true</command>")
    env.grant_extra_ask()
    obs = env.observe()
    assert "STOP INVESTIGATING. Your step budget is exhausted." in obs
    assert obs.endswith("your best estimate even if unsure.") and env.render() == obs
    env.close()


def test_a_forced_prompt_longer_than_the_observation_space_is_clipped(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=2, max_observation_chars=150)
    env.reset(seed=0)
    env.force_answer()
    obs = env.observe()
    assert len(obs) <= 150 and env.observation_space.contains(obs)
    assert obs.startswith("QUESTION:") and obs.endswith("FINAL ANSWER: <answer>")
    env.close()


def test_require_verified_leaf_withholds_until_switched_off_and_outlives_reset(env):
    assert env.require_verified_leaf is False  # off unless asked for
    env.require_verified_leaf = True
    env.reset(seed=0)
    env.reset(seed=0)  # a setting, not episode state
    _, _, term, _, info = env.step("FINAL ANSWER: 5")
    assert not term and info[keys.GATED] == 1 and info[keys.ANSWER] == ""
    assert info[keys.NUDGE] == f"your answer was withheld: {GATE_NUDGE}"
    env.require_verified_leaf = False
    _, _, term, _, info = env.step("FINAL ANSWER: 5")
    assert term and info[keys.ANSWER] == "5" and info[keys.GATED] == 1


def test_reward_config_and_limits_reach_the_episode(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=4, limits=SandboxLimits(timeout_s=1),
                  reward=RewardConfig(strength=False, verification_weight=1.0))
    env.reset(seed=0)
    _, reward, _, _, _ = env.step(GOOD_NODE)
    assert reward == pytest.approx(1.0 / 4 / 3 * 2)
    info = env.step("<command>sleep 5; echo late</command>")[4]
    assert "late" not in info[keys.COMMAND_OUTPUT] and "timed out" in info[keys.COMMAND_OUTPUT]
    env.close()


def test_after_close_the_env_refuses_steps_and_its_sandbox_stages_nothing(alcohol_task):
    env = VeraEnv([alcohol_task], max_steps=4)
    env.reset(seed=0)
    env.close()
    with pytest.raises(ResetNeeded, match="call reset"):
        env.step("<command>ls</command>")
    with pytest.raises(SandboxError, match="closed"):
        env.sandbox.stage(alcohol_task.data_files())
