"""The ORS server driven by the ``ors-sdk`` client (``ors.client``) on 127.0.0.1."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from ors.client import ORS, AsyncORS
from serve_helpers import NODE, eventually, running

from vera_env.serve import ServeConfig, create_app
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks
from vera_env.verification.rewards import RewardConfig

BUILTIN = load_tasks("builtin")
NO_STRENGTH = RewardConfig(strength=False)


def ors_app(spec: EnvSpec, **config) -> object:
    return create_app(spec, config=ServeConfig(protocol="ors", **config))


def test_ors_builtin_episodes_reward_only_when_finished_and_graded_right():
    app = ors_app(EnvSpec(max_steps=12))
    with running(app) as url, ORS(base_url=url) as client:
        env = client.environment("vera")
        for index in (0, 4):
            task = env.get_task("train", index)
            turns = BUILTIN.get(task.task_spec["task_id"]).solution
            with env.session(split="train", index=index) as session:
                prompt = session.get_prompt()[0].text
                outputs = [session.call_tool("turn", {"text": t}) for t in turns]
            assert BUILTIN.get(task.task_spec["task_id"]).question in prompt
            assert [o.finished for o in outputs] == [False] * (len(turns) - 1) + [True]
            assert [o.reward for o in outputs[:-1]] == [None] * (len(turns) - 1)
            last = outputs[-1]
            assert last.metadata["correct"] is True and last.metadata["unscorable"] is False
            # the reward at the end is the episode's return: the sum of its step rewards
            assert last.reward == pytest.approx(sum(o.metadata["step_reward"] for o in outputs))
        assert eventually(lambda: not app.state.vera.registry.sessions())


def test_ors_folder_suite_graded_right_and_unscorable_reward_is_null(suite):
    app = ors_app(EnvSpec(tasks=str(suite), max_steps=6))
    with running(app) as url, ORS(base_url=url) as client:
        env = client.environment("vera")
        ids = [t.task_spec["task_id"] for t in env.list_tasks("train")]
        ends = {}
        for index, task_id in enumerate(ids):
            with env.session(split="train", index=index) as session:
                session.call_tool("turn", {"text": NODE})
                ends[task_id] = session.call_tool("final_answer", {"answer": "5.0"})
    assert ends["drinks-mean"].finished and ends["drinks-mean"].metadata["correct"] is True
    assert ends["drinks-mean"].reward > 1.0  # the answer plus the verified node
    judged = ends["drinks-judged"]  # llm-graded, and no judge is served
    assert judged.finished and judged.reward is None
    assert judged.metadata["unscorable"] is True and judged.metadata["episode_return"] is None


def test_ors_eight_concurrent_sessions_each_graded_right():
    # Sessions and grading are the point; strength through ORS is tested by the builtin episodes.
    app = ors_app(EnvSpec(max_steps=12, reward=NO_STRENGTH), max_sessions=8)

    async def episode(env, index: int) -> tuple[str, bool]:
        task = await env.get_task("train", index)
        task_id = task.task_spec["task_id"]
        async with env.session(split="train", index=index) as session:
            for turn in BUILTIN.get(task_id).solution:
                out = await session.call_tool("turn", {"text": turn})
        return task_id, out.metadata["correct"]

    async def everything(url: str) -> list:
        client = AsyncORS(base_url=url)  # kept: the SDK closes its sessions when it is freed
        env = client.environment("vera")
        try:
            return await asyncio.gather(*(episode(env, i) for i in range(8)))
        finally:
            await env.client.close()

    with running(app) as url:
        outcomes = asyncio.run(everything(url))
    assert [o[0] for o in outcomes] == list(BUILTIN.ids()[:8])
    assert all(o[1] is True for o in outcomes)


def test_ors_full_server_answers_busy_503():
    app = ors_app(EnvSpec(max_steps=4), max_sessions=1)
    with running(app) as url, ORS(base_url=url) as client:
        env = client.environment("vera")
        with env.session(split="train", index=0) as first:
            first.get_prompt()
            # the SDK retries a 503 (three tries), then re-raises it annotated with the sid
            with pytest.raises(RuntimeError, match=r"503, message='busy: 1 of 1 sessions"):
                with env.session(split="train", index=1):
                    pass
        # the place is free again once the first session is deleted
        with env.session(split="train", index=1) as second:
            assert second.get_prompt()


def test_ors_splits_tasks_and_tools_never_show_the_answer(suite):
    app = create_app(EnvSpec(max_steps=4), splits={"validation": str(suite), "test": "builtin"},
                     config=ServeConfig(protocol="ors"))
    with running(app) as url, ORS(base_url=url) as client:
        env = client.environment("vera")
        splits = env.list_splits()
        sizes = {split: env.num_tasks(split) for split in splits}
        task = env.get_task("validation", 1)
        tools = {tool.name: tool for tool in env.list_tools()}
        with env.session(task=task) as session:
            shell = session.call_tool("shell", {"command": "wc -l drinks.tsv"})
        with pytest.raises(aiohttp.ClientResponseError, match="Invalid index"):
            env.get_task("test", 999)
    assert splits == ["train", "validation", "test"]
    assert sizes == {"train": 13, "validation": 2, "test": 13}
    assert task.task_spec == {"task_id": "drinks-mean", "split": "validation", "index": 1}
    assert set(tools) == {"turn", "shell", "final_answer"}
    assert tools["turn"].input_schema["required"] == ["text"]
    assert "5 drinks.tsv" in shell.metadata["command_output"] and not shell.finished


def test_ors_refused_create_gives_its_place_back():
    app = ors_app(EnvSpec(max_steps=4), max_sessions=1)
    with running(app) as url, ORS(base_url=url) as client:
        env = client.environment("vera")
        with pytest.raises(RuntimeError, match="Invalid split"):
            with env.session(split="nope", index=0):
                pass
        with pytest.raises(RuntimeError, match="Invalid index"):
            with env.session(split="train", index=99):
                pass
        assert app.state.vera.registry.describe()["reserved"] == 0
        with env.session(split="train", index=2) as session:  # the one place is free
            assert session.get_prompt()


def test_a_later_server_in_the_same_process_streams_without_loop_errors(capfd):
    # sse-starlette 2.3 (pinned by openreward) kept one shutdown event for the process:
    # every server after the first logged "bound to a different event loop" on each
    # streamed call, and a client retry could play a turn twice.
    for _ in range(2):
        app = ors_app(EnvSpec(max_steps=4))
        with running(app) as url, ORS(base_url=url) as client:
            env = client.environment("vera")
            with env.session(split="train", index=0) as session:
                out = session.call_tool("turn", {"text": "<command>echo hi</command>"})
        assert out.metadata["command_output"].strip() == "hi"
    captured = capfd.readouterr()
    assert "bound to a different event loop" not in captured.out + captured.err
