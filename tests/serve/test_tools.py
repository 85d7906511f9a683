"""VeraToolEnv as TRL uses it: tools found and described the way GRPOTrainer does, reset
with a dataset row, rewarded by get_reward — against a real server."""

from __future__ import annotations

import inspect
import math

import pytest
from serve_helpers import running

from vera_env.serve import create_app
from vera_env.serve.tools import VeraToolEnv
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks

BUILTIN = load_tasks("builtin")


def trl_tools(environment) -> list:
    """The tools GRPOTrainer exposes: public functions of the class but reset/get_reward."""
    return [getattr(environment, name)
            for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def test_tool_env_exposes_one_turn_tool_with_a_schema_transformers_accepts():
    get_json_schema = pytest.importorskip("transformers.utils").get_json_schema
    with running(create_app(EnvSpec(max_steps=4))) as url:
        env = VeraToolEnv(url)
        tools = trl_tools(env)
        env._close()
    assert [tool.__name__ for tool in tools] == ["turn"]
    schema = get_json_schema(tools[0])["function"]
    assert schema["name"] == "turn" and schema["parameters"]["required"] == ["text"]
    assert "FINAL ANSWER" in schema["parameters"]["properties"]["text"]["description"]


def test_tool_env_plays_a_dataset_row_and_rewards_the_return(suite):
    app = create_app(EnvSpec(max_steps=6), splits={"test": str(suite)})
    task_id = BUILTIN.ids()[1]
    with running(app) as url:
        env = VeraToolEnv(url)
        prompt = env.reset(prompt=[{"role": "user", "content": ""}], task_id=task_id, seed=0)
        outputs = [env.turn(turn) for turn in BUILTIN.get(task_id).solution]
        reward = env.get_reward()
        assert env.info["correct"] is True and outputs[-1].endswith("is scored.]")
        assert env.turn("FINAL ANSWER: 0").startswith("The episode is over.")
        env.reset(split="test", index=0)  # drinks-judged: llm-graded, no judge served
        for turn in load_tasks(suite).get("drinks-judged").solution:
            env.turn(turn)
        unscored = env.get_reward()
        env._close()
    assert BUILTIN.get(task_id).question in prompt
    assert reward > 1.0 and math.isnan(unscored)
