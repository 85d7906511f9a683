"""The OpenEnv server driven by OpenEnv's own client (``GenericEnvClient``) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest
from openenv.core.generic_client import GenericEnvClient
from serve_helpers import eventually, running

from vera_env.serve import ServeConfig, create_app
from vera_env.spec import EnvSpec
from vera_env.tasks import load_tasks
from vera_env.verification.rewards import RewardConfig

BUILTIN = load_tasks("builtin")
NO_STRENGTH = RewardConfig(strength=False)


def get_json(url: str, token: str | None = None) -> tuple[int, object]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
            return response.status, (json.loads(body) if body[:1] in (b"{", b"[") else body)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def play(client, task_id: str, turns) -> list:
    results = [client.reset(task_id=task_id, seed=0)]
    results += [client.step({"text": turn}) for turn in turns]
    return results


def local_rewards(task_id: str, turns, tasks=BUILTIN, spec: EnvSpec | None = None) -> list:
    env = (spec or EnvSpec(max_steps=12)).build(tasks=tasks)
    env.reset(seed=0, options={"task_id": task_id})
    rewards = [env.step(turn)[1] for turn in turns]
    env.close()
    return rewards


def test_openenv_builtin_oracle_episodes_graded_right_with_local_rewards():
    app = create_app(EnvSpec(max_steps=12))
    with running(app) as url, GenericEnvClient(base_url=url).sync() as client:
        for task_id in BUILTIN.ids()[:2]:
            turns = BUILTIN.get(task_id).solution
            results = play(client, task_id, turns)
            last = results[-1].observation
            assert results[0].reward is None and results[0].observation["task_id"] == task_id
            assert results[-1].done and last["terminated"] and not last["truncated"]
            assert last["correct"] is True and last["unscorable"] is False
            assert [r.reward for r in results[1:]] == pytest.approx(local_rewards(task_id, turns))
        state = client.state()
    assert state["step_count"] == len(turns) and state["done"] is True


def test_openenv_folder_suite_graded_right_and_unscorable_reward_is_null(suite):
    app = create_app(EnvSpec(tasks=str(suite), max_steps=6))
    with running(app) as url, GenericEnvClient(base_url=url).sync() as client:
        turns = load_tasks(suite).get("drinks-mean").solution
        graded = play(client, "drinks-mean", turns)[-1]
        judged = play(client, "drinks-judged", turns)[-1]
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()
    assert graded.observation["correct"] is True and graded.reward == pytest.approx(
        sum(local_rewards("drinks-mean", turns, load_tasks(suite), EnvSpec(max_steps=6))[-1:]))
    # no judge is served: the llm-graded answer is unscorable, and its reward null, not 0
    assert judged.done and judged.observation["unscorable"] is True
    assert judged.reward is None and judged.observation["correct"] is None
    assert "vera_serve_unscorable_steps_total 1.0" in metrics
    assert "vera_serve_steps_total 4.0" in metrics


def test_openenv_eight_concurrent_sessions_each_graded_right():
    # Sessions and grading are the point; strength through serve is tested by the episodes above.
    app = create_app(EnvSpec(max_steps=12, reward=NO_STRENGTH), config=ServeConfig(max_sessions=8))
    task_ids = BUILTIN.ids()[:8]

    async def episode(url: str, task_id: str) -> tuple[str, bool, str]:
        async with GenericEnvClient(base_url=url) as client:
            await client.reset(task_id=task_id, seed=0)
            for turn in BUILTIN.get(task_id).solution:
                result = await client.step({"text": turn})
            state = await client.state()
            return result.observation["task_id"], result.observation["correct"], \
                state["session_id"]

    async def everything(url: str) -> list:
        return await asyncio.gather(*(episode(url, t) for t in task_ids))

    with running(app) as url:
        outcomes = asyncio.run(everything(url))
        # every session is closed (its sandbox killed) when its socket closes
        assert eventually(lambda: not app.state.vera.registry.sessions())
    assert [o[0] for o in outcomes] == list(task_ids)
    assert all(o[1] is True for o in outcomes)
    assert len({o[2] for o in outcomes}) == 8


def test_openenv_slow_step_does_not_block_other_sessions():
    app = create_app(EnvSpec(max_steps=12))
    task_id = BUILTIN.ids()[0]

    async def race(url: str) -> tuple[bool, bool]:
        async with GenericEnvClient(base_url=url) as slow, \
                GenericEnvClient(base_url=url) as quick:
            await slow.reset(task_id=task_id)
            await quick.reset(task_id=task_id)  # staging is not part of the race
            sleeping = asyncio.ensure_future(
                slow.step({"text": "<command>sleep 10; echo slept</command>"}))
            for _ in range(200):  # until the server is inside the slow step
                if any(s.busy for s in app.state.vera.registry.sessions()):
                    break
                await asyncio.sleep(0.05)
            await quick.step({"text": BUILTIN.get(task_id).solution[0]})
            finished_first = not sleeping.done()
            result = await sleeping
            return finished_first, "slept" in result.observation["command_output"]

    with running(app) as url:
        quick_first, slept = asyncio.run(race(url))
    assert quick_first and slept


def test_openenv_full_server_answers_capacity_reached():
    app = create_app(EnvSpec(max_steps=4), config=ServeConfig(max_sessions=1))
    task_id = BUILTIN.ids()[0]
    with running(app) as url, GenericEnvClient(base_url=url).sync() as first, \
            GenericEnvClient(base_url=url).sync() as second:
        first.reset(task_id=task_id)
        with pytest.raises(RuntimeError, match=r"Server at capacity: 1/1.*CAPACITY_REACHED"):
            second.reset(task_id=task_id)


def test_openenv_reset_by_split_and_index_and_errors_name_their_type():
    app = create_app(EnvSpec(max_steps=4), splits={"test": "builtin"})
    with running(app) as url, GenericEnvClient(base_url=url).sync() as client:
        result = client.reset(split="test", index=3)
        assert result.observation["task_id"] == BUILTIN.ids()[3]
        with pytest.raises(RuntimeError, match=r"IndexError: task index 99 out of range"):
            client.reset(split="test", index=99)
        with pytest.raises(RuntimeError, match=r"ValueError: unknown reset options \['shuffle'\]"):
            client.reset(shuffle=True)
        with pytest.raises(RuntimeError, match=r"UnknownTaskError: no task 'nope'"):
            client.reset(task_id="nope")


def test_openenv_metadata_version_schema_health_and_task_api():
    app = create_app(EnvSpec(max_steps=4), splits={"validation": "builtin"})
    with running(app) as url:
        _, metadata = get_json(f"{url}/metadata")
        _, schema = get_json(f"{url}/schema")
        _, health = get_json(f"{url}/health")
        _, splits = get_json(f"{url}/vera/splits")
        request = urllib.request.Request(f"{url}/vera/task", method="POST",
                                         data=b'{"split": "validation", "index": 2}',
                                         headers={"Content-Type": "application/json"})
        task = json.loads(urllib.request.urlopen(request, timeout=30).read())["task"]
    assert metadata["name"] == "vera" and metadata["version"] == app.state.vera.splits.version
    assert schema["action"]["required"] == ["text"]  # what verifiers' raw-text actions need
    observation = schema["observation"]["properties"]
    assert {"text", "reward_parts", "terminated", "truncated", "unscorable", "correct",
            "answer", "error", "checks", "prefill", "forcing"} <= set(observation)
    assert health["status"] == "healthy"
    assert [s["name"] for s in splits] == ["train", "validation"]
    assert task == {"task_id": BUILTIN.ids()[2], "split": "validation", "index": 2}


def test_openenv_bearer_token_required_except_health():
    app = create_app(EnvSpec(max_steps=4), config=ServeConfig(token="s3cret"))
    with running(app) as url:
        assert get_json(f"{url}/metadata")[0] == 401
        assert get_json(f"{url}/metadata", token="wrong")[0] == 401
        assert get_json(f"{url}/metadata", token="s3cret")[0] == 200
        assert get_json(f"{url}/health")[0] == 200
        with pytest.raises(ConnectionError):
            GenericEnvClient(base_url=url).sync().reset()
        with GenericEnvClient(base_url=url,
                              headers={"Authorization": "Bearer s3cret"}).sync() as client:
            assert client.reset(task_id=BUILTIN.ids()[0]).observation["step"] == 0
