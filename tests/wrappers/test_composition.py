"""The wrappers compose with each other and with Gymnasium's own wrappers."""

from __future__ import annotations

import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.wrappers import RecordEpisodeStatistics, TimeLimit

import vera_env
from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.wrappers import (
    DEFAULT_WRAPPERS,
    WRAPPERS_HELP,
    EmissionGate,
    ForcedAnswer,
    RecordEpisode,
    apply_wrappers,
    parse_wrapper_names,
)
from vera_env.wrappers.forced_answer import PREFILL


def test_check_env_passes_on_fully_wrapped_env(alcohol_task, tmp_path):
    base = gym.make(vera_env.ENV_ID, tasks=[alcohol_task], max_steps=6)
    env = RecordEpisode(ForcedAnswer(EmissionGate(base)), tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # The one warning check_env always gives a wrapped env, by design of this test.
        warnings.filterwarnings("ignore", message=".*different from the unwrapped version.*")
        check_env(env)
    env.close()


@pytest.mark.parametrize("order", [("forced", "gate"), ("gate", "forced")])
def test_gymnasium_wrappers_see_forced_steps(alcohol_task, order):
    env = RecordEpisodeStatistics(TimeLimit(
        apply_wrappers(VeraEnv([alcohol_task], max_steps=3), order), max_episode_steps=10))
    env.reset(seed=0)
    env.step("<command>true</command>")
    _, _, _, _, info = env.step("FINAL ANSWER: 5")  # withheld by the gate or forced
    if not info[keys.ANSWER]:
        _, _, term, trunc, info = env.step(PREFILL + "5")
    assert info[keys.CORRECT] is True
    assert info["episode"]["l"] == info[keys.STEP]
    env.close()


def test_apply_wrappers_rejects_unknown_name(alcohol_task):
    with pytest.raises(ValueError, match="unknown wrapper"):
        apply_wrappers(VeraEnv([alcohol_task]), ["forcd"])


@pytest.mark.parametrize("text, names", [
    ("", ()), ("  ", ()), ("none", ()), (" None ", ()),
    ("forced", ("forced",)), ("gate, forced", ("gate", "forced")), ("forced,,gate,", ("forced", "gate")),
])
def test_parse_wrapper_names_reads_a_comma_list_in_order(text, names):
    assert parse_wrapper_names(text) == names


@pytest.mark.parametrize("text, message", [
    ("forced,gat", r"unknown wrapper\(s\) \['gat'\]; expected a comma list of \['forced', 'gate'\]"),
    ("Gate", r"unknown wrapper\(s\) \['Gate'\]"),
    ("gate,forced,gate", r"each wrapper may appear once, got \['gate', 'forced', 'gate'\]"),
])
def test_parse_wrapper_names_refuses_unknown_and_repeated_names(text, message):
    with pytest.raises(ValueError, match=message):
        parse_wrapper_names(text)


def test_default_wrappers_put_forced_answer_outside_the_gate_as_the_help_says(alcohol_task):
    env = apply_wrappers(VeraEnv([alcohol_task], max_steps=4), DEFAULT_WRAPPERS)
    assert isinstance(env, ForcedAnswer) and isinstance(env.env, EmissionGate)
    assert "innermost first" in WRAPPERS_HELP
    assert "gate,forced is ForcedAnswer around EmissionGate" in WRAPPERS_HELP
    assert f"(default: {','.join(DEFAULT_WRAPPERS)})" in WRAPPERS_HELP
    env.close()
