"""The one chat path: what evaluation policies send and what step-wise training trains on."""

from __future__ import annotations

import pytest

from vera_env.policies import OpenAIChatPolicy
from vera_env.policies.chat import chat_messages, prompt_ids, prompt_text

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tokenizer():
    from vera_env.training.tiny import tiny_tokenizer

    return tiny_tokenizer()


def test_chat_messages_system_then_observation_as_the_one_user_message():
    assert chat_messages("obs") == [{"role": "user", "content": "obs"}]
    assert chat_messages("obs", "sys") == [{"role": "system", "content": "sys"},
                                           {"role": "user", "content": "obs"}]
    policy = OpenAIChatPolicy("http://127.0.0.1:9/v1", "m", system_prompt="sys")
    assert policy.messages("obs") == chat_messages("obs", "sys")


def test_prompt_text_is_template_with_generation_prompt_then_prefill(tokenizer):
    text = prompt_text(tokenizer, "QUESTION: x?", prefill="FINAL ANSWER: ", system_prompt="S")
    assert text == ("<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQUESTION: x?<|im_end|>\n"
                    "<|im_start|>assistant\nFINAL ANSWER: ")
    ids = prompt_ids(tokenizer, "QUESTION: x?", prefill="FINAL ANSWER: ", system_prompt="S")
    assert tokenizer.decode(ids) == text


def test_prompt_text_without_template_joins_contents(tokenizer):
    class Plain:
        chat_template = None

    assert prompt_text(Plain(), "obs", prefill="P", system_prompt="sys") == "sys\n\nobs\n\nP"


def test_transformers_policy_generates_from_the_shared_prompt(tokenizer):
    from vera_env.policies import TransformersPolicy
    from vera_env.training.tiny import tiny_model

    policy = TransformersPolicy(tiny_model(tokenizer), tokenizer, max_new_tokens=3,
                                system_prompt="S")
    assert policy.prompt("obs", "FINAL ANSWER: ") == prompt_text(
        tokenizer, "obs", prefill="FINAL ANSWER: ", system_prompt="S")
    policy.act("obs", {"prefill": "FINAL ANSWER: "})
    prompt_tokens, _ = policy.last_usage()
    assert prompt_tokens == len(prompt_ids(tokenizer, "obs", prefill="FINAL ANSWER: ",
                                           system_prompt="S"))
