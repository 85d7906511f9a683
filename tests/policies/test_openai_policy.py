"""OpenAIChatPolicy: one message per turn, prefill when forcing, usage into the Attempt."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from vera_env.env import VeraEnv
from vera_env.errors import PolicyError
from vera_env.llm import ChatClient
from vera_env.policies import OpenAIChatPolicy, ScriptedPolicy
from vera_env.rollout import arun_many, run_episode
from vera_env.wrappers import ForcedAnswer

NODE = ('<command>wc -l alcohol.txt</command>\nNODE kind=load summary="5 lines"\n'
        'CHECK range "5 lines" :: test $(wc -l < alcohol.txt) -eq 5 && echo True || echo False')


def answering(replies, seen):
    """A handler replying with ``replies`` in turn (the last one repeats)."""
    def handle(request):
        body = json.loads(request.content)
        seen.append(body)
        prefilled = body.get("continue_final_message")
        text = "5" if prefilled else replies[min(len(seen) - 1, len(replies) - 1)]
        return httpx.Response(200, json={
            "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
    return handle


def policy_for(handle, **kw):
    client = ChatClient("http://llm.test/v1", "m", transport=httpx.MockTransport(handle),
                        async_transport=httpx.MockTransport(handle), backoff_s=0.001)
    return OpenAIChatPolicy(client=client, **kw)


def test_episode_sends_only_the_observation_and_sums_usage(alcohol_task):
    seen = []
    policy = policy_for(answering([NODE, "FINAL ANSWER: 5"], seen), system_prompt="Be terse.")
    env = VeraEnv([alcohol_task], max_steps=5)
    attempt = run_episode(env, policy)
    env.close()
    assert attempt.status == "ok" and attempt.correct is True
    assert [[m["role"] for m in b["messages"]] for b in seen] == [["system", "user"]] * 2
    assert seen[1]["messages"][1]["content"].startswith("QUESTION: Mean drinks")
    assert "5 lines" in seen[1]["messages"][1]["content"]        # the bounded state
    assert NODE not in seen[1]["messages"][1]["content"]          # never the transcript
    assert (attempt.prompt_tokens, attempt.completion_tokens) == (200, 20)


def test_forced_turn_is_prefilled_and_answer_released(alcohol_task):
    seen = []
    env = ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve=1)
    attempt = run_episode(env, policy_for(answering(["<command>true</command>"], seen)))
    env.close()
    assert seen[-1]["continue_final_message"] is True
    assert attempt.steps[-1].action == "FINAL ANSWER: 5" and attempt.correct is True


def test_prefill_disabled_sends_no_continuation(alcohol_task):
    seen = []
    env = ForcedAnswer(VeraEnv([alcohol_task], max_steps=2), reserve=1)
    run_episode(env, policy_for(answering(["FINAL ANSWER: 5"], seen), prefill=False))
    env.close()
    assert not any(b.get("continue_final_message") for b in seen)


def test_provider_failure_is_an_exclusion(alcohol_task):
    policy = policy_for(lambda request: httpx.Response(503))
    policy.client.max_retries = 1
    env = VeraEnv([alcohol_task], max_steps=3)
    attempt = run_episode(env, policy)
    env.close()
    assert attempt.status == "provider" and attempt.score is None and "HTTP 503" in attempt.error


def test_arun_many_uses_aact_and_keeps_usage_per_episode(alcohol_task):
    seen = []
    policy = policy_for(answering([NODE, "FINAL ANSWER: 5"] * 50, seen))
    scripted = ScriptedPolicy([NODE, "FINAL ANSWER: 5"])

    async def go(p):
        return await arun_many(lambda: VeraEnv([alcohol_task], max_steps=5), p,
                               [(None, s) for s in range(4)], concurrency=2)
    attempts = asyncio.run(go(policy))
    assert all(a.status == "ok" for a in attempts)
    assert all(a.prompt_tokens == 100 * a.n_steps for a in attempts)
    plain = asyncio.run(go(scripted))
    assert all(a.correct and a.prompt_tokens is None for a in plain)
    with pytest.raises(ValueError, match="concurrency"):
        asyncio.run(arun_many(lambda: None, scripted, [], concurrency=0))


def test_constructor_needs_a_client_or_an_endpoint():
    with pytest.raises(ValueError, match="base_url and model"):
        OpenAIChatPolicy("http://x/v1")
    client = ChatClient("http://x/v1", "m")
    with pytest.raises(ValueError, match="not both"):
        OpenAIChatPolicy("http://x/v1", "m", client=client)
    assert OpenAIChatPolicy("http://x/v1", "m").client.model == "m"


def test_malformed_reply_raises_policy_error():
    policy = policy_for(lambda request: httpx.Response(200, text="{}"))
    with pytest.raises(PolicyError, match="malformed"):
        policy.act("obs", {"prefill": ""})
