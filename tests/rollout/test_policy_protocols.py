"""A policy's optional parts are protocols (``vera_env.policy``), found with ``isinstance``.

Each part changes what the rollout or ``vera-env eval`` does only when the policy has it:
``begin_episode`` is called after every reset, ``last_usage`` is summed into the
Attempt, ``aact`` is awaited instead of ``act`` in a thread, the ``client`` gets the
one-token preflight and ``aclose`` is awaited after the run. A policy without them plays
exactly as before.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from vera_env import info as keys
from vera_env.cli import main
from vera_env.env import VeraEnv
from vera_env.policies import OpenAIChatPolicy, OraclePolicy, ScriptedPolicy
from vera_env.policy import (
    AsyncClosable,
    AsyncPolicy,
    ChatBacked,
    EpisodeAware,
    Policy,
    ReportsUsage,
)
from vera_env.rollout import Attempt, arun_episode, run_episode, run_many
from vera_env.tasks import TaskSource

TURNS = ["<command>true</command>", "FINAL ANSWER: 5"]


class _ActOnly:
    """The smallest policy: ``act`` and nothing optional."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return TURNS[min(info[keys.STEP], len(TURNS) - 1)]


class _Stateful(_ActOnly):
    """Records every ``begin_episode`` and reports (10, 2) tokens per call, kept per
    thread the way a shared model policy keeps them."""

    def __init__(self, usage: tuple[int | None, int | None] = (10, 2)) -> None:
        self.begun: list[str] = []
        self.usage = usage
        self._local = threading.local()

    def begin_episode(self, info: dict[str, Any]) -> None:
        self.begun.append(info[keys.TASK_ID])

    def act(self, observation: str, info: dict[str, Any]) -> str:
        self._local.usage = self.usage
        return super().act(observation, info)

    def last_usage(self) -> tuple[int | None, int | None]:
        return getattr(self._local, "usage", (None, None))


class _AsyncOnly(_Stateful):
    """``aact`` must be the path taken on the event loop: ``act`` raises."""

    def act(self, observation: str, info: dict[str, Any]) -> str:
        raise AssertionError("act called although the policy has aact")

    async def aact(self, observation: str, info: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        self._local.usage = self.usage
        return _ActOnly.act(self, observation, info)


class _StatefulCalled(_Stateful):
    """A ``_Stateful`` whose last call already happened in this thread."""

    def __init__(self, usage: tuple[int | None, int | None]) -> None:
        super().__init__(usage)
        self._local.usage = usage


def test_protocols_scripted_policy_has_only_aact() -> None:
    policy = ScriptedPolicy(TURNS)
    assert isinstance(policy, Policy) and isinstance(policy, AsyncPolicy)
    for part in (EpisodeAware, ReportsUsage, AsyncClosable, ChatBacked):
        assert not isinstance(policy, part), part.__name__


def test_protocols_openai_policy_has_usage_aact_aclose_and_client() -> None:
    policy = OpenAIChatPolicy("http://127.0.0.1:9/v1", "m")
    for part in (Policy, AsyncPolicy, ReportsUsage, AsyncClosable, ChatBacked):
        assert isinstance(policy, part), part.__name__
    assert not isinstance(policy, EpisodeAware)


def test_protocols_act_only_policy_matches_no_optional_part() -> None:
    policy = _ActOnly()
    assert isinstance(policy, Policy)
    for part in (EpisodeAware, AsyncPolicy, ReportsUsage, AsyncClosable, ChatBacked):
        assert not isinstance(policy, part), part.__name__


def test_run_episode_episode_aware_policy_begins_once_with_the_reset_task(alcohol_task) -> None:
    policy = _Stateful()
    env = VeraEnv([alcohol_task], max_steps=4)
    try:
        attempt = run_episode(env, policy, seed=0)
    finally:
        env.close()
    assert attempt.status == "ok" and policy.begun == ["alcohol-mean"]


def test_run_episode_usage_reporting_policy_sums_tokens_over_turns(alcohol_task) -> None:
    env = VeraEnv([alcohol_task], max_steps=4)
    try:
        attempt = run_episode(env, _Stateful((10, 2)), seed=0)
    finally:
        env.close()
    assert attempt.n_steps == 2
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (20, 4)


def test_run_episode_without_optional_parts_plays_and_reports_no_usage(alcohol_task) -> None:
    env = VeraEnv([alcohol_task], max_steps=4)
    try:
        attempt = run_episode(env, _ActOnly(), seed=0)
    finally:
        env.close()
    assert attempt.status == "ok" and attempt.correct is True
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (None, None)


def test_count_usage_half_reported_usage_keeps_the_missing_half_none() -> None:
    attempt = Attempt.start("t")
    for _ in range(3):
        attempt.count_usage(_StatefulCalled((None, 7)))
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (None, 21)


def test_begin_without_policy_or_hook_only_takes_the_task_id() -> None:
    attempt = Attempt.start()
    attempt.begin({keys.TASK_ID: "t1"})
    attempt.begin({keys.TASK_ID: "t2"}, _ActOnly())
    assert attempt.task_id == "t2"


def test_run_many_episode_aware_policy_begins_every_episode(alcohol_task) -> None:
    policy = _Stateful()
    attempts = run_many(lambda: VeraEnv([alcohol_task], max_steps=4), policy,
                        [(None, 0), (None, 1), (None, 2)], concurrency=2)
    assert [a.status for a in attempts] == ["ok"] * 3
    assert policy.begun == ["alcohol-mean"] * 3
    assert all(a.prompt_tokens == 20 for a in attempts)


def test_arun_episode_async_policy_awaits_aact_and_counts_its_usage(alcohol_task) -> None:
    policy = _AsyncOnly((5, 1))
    env = VeraEnv([alcohol_task], max_steps=4)
    try:
        attempt = asyncio.run(arun_episode(env, policy, seed=0))
    finally:
        env.close()
    assert attempt.status == "ok", attempt.error
    assert policy.begun == ["alcohol-mean"]
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (10, 2)


def test_arun_episode_sync_policy_usage_is_read_in_the_thread_that_acted(alcohol_task) -> None:
    """``act`` runs in a worker thread; usage kept per thread is read there, or lost."""
    env = VeraEnv([alcohol_task], max_steps=4)
    try:
        attempt = asyncio.run(arun_episode(env, _Stateful((3, 4)), seed=0))
    finally:
        env.close()
    assert attempt.status == "ok", attempt.error
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (6, 8)


class _Client:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def chat(self, messages: list[dict[str, str]], **options: Any) -> None:
        self.calls.append({"messages": messages, **options})


class _Endpointish(OraclePolicy):
    """An oracle that looks like an endpoint policy: a ``client`` and an ``aclose``."""

    def __init__(self, tasks: TaskSource) -> None:
        super().__init__(tasks)
        self.client = _Client()
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


def _eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> list[Any]:
    made: list[Any] = []

    def make_policy(name: str, args: Any, source: TaskSource) -> Any:
        made.append(_Endpointish(source) if name == "oracle" else None)
        return made[-1]

    monkeypatch.setattr("vera_env.cli.eval.make_policy", make_policy)
    code = main(["eval", "--policy", "oracle", "--limit", "1", "--max-steps", "6",
                 "--out", str(tmp_path / "run"), *extra])
    assert code == 0
    return made


def test_eval_chat_backed_policy_gets_one_token_preflight_and_is_aclosed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [policy] = _eval(tmp_path, monkeypatch)
    assert [call["max_tokens"] for call in policy.client.calls] == [1]
    assert policy.closed == 1


def test_eval_no_preflight_sends_nothing_but_still_acloses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    [policy] = _eval(tmp_path, monkeypatch, "--no-preflight")
    assert policy.client.calls == [] and policy.closed == 1


def test_eval_judge_flags_reach_the_env_spec_only_when_both_are_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _eval(tmp_path / "a", monkeypatch, "--judge-base-url", "http://127.0.0.1:9/v1",
          "--judge-model", "judge", "--judge-api-key-env", "MY_KEY")
    _eval(tmp_path / "b", monkeypatch)
    with_judge = json.loads((tmp_path / "a" / "run" / "run.json").read_text())["env"]
    without = json.loads((tmp_path / "b" / "run" / "run.json").read_text())["env"]
    assert with_judge["judge"] == {"base_url": "http://127.0.0.1:9/v1", "model": "judge",
                                   "api_key_env": "MY_KEY"}
    assert without["judge"] is None and without["observation_variant"] == "full"
