"""Episodes as token ids: chat-template suffixes, budgets, prefill, faults (no model)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from training.envs import make_env
from training.episodes import (
    IGNORE,
    ChatFormat,
    Start,
    draw_starts,
    format_start,
    parse_start,
    play_episodes,
    tokenize_transcript,
)
from vera_env import VeraEnv
from vera_env.errors import SandboxError
from vera_env.tasks import load_tasks

TASK = "seq.gc_content.easy.s0"


@pytest.fixture(scope="module")
def fmt(tokenizer) -> ChatFormat:
    return ChatFormat(tokenizer)


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(max_workers=4) as workers:
        yield workers


class FixedTurns:
    """A sampler that answers every context with the same ids, recording what it saw."""

    def __init__(self, ids: list[int]) -> None:
        self.ids, self.calls = ids, []

    def __call__(self, contexts: list[list[int]], max_new_tokens: int) -> list:
        self.calls.append((len(contexts), max_new_tokens))
        return [(self.ids[:max_new_tokens], [-0.5] * min(len(self.ids), max_new_tokens))
                for _ in contexts]


def test_chat_format_concatenation_equals_the_template_rendering(tokenizer, fmt):
    turn = "<command>ls</command>"
    ids = fmt.first("obs one") + fmt.encode(turn) + [tokenizer.eos_token_id] \
        + fmt.observation("obs two")
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "obs one"}, {"role": "assistant", "content": turn},
         {"role": "user", "content": "obs two"}],
        add_generation_prompt=True, tokenize=True, return_dict=False)
    assert ids == list(rendered)


def test_chat_format_without_template_raises(tokenizer):
    class NoTemplate:
        chat_template = None

    with pytest.raises(ValueError, match="no chat_template"):
        ChatFormat(NoTemplate())


def test_parse_start_round_trips_and_rejects_plain_prompts():
    start = Start("seq.gc_content.easy.s3", 7)
    assert parse_start(format_start(start)) == start
    with pytest.raises(ValueError, match="format_start"):
        parse_start("What is the GC content?")


def test_draw_starts_uses_every_task_before_repeating_one():
    starts = draw_starts(["a", "b", "c"], 7, seed=1)
    assert sorted(s.task_id for s in starts[:3]) == ["a", "b", "c"]
    assert len(starts) == 7 and starts == draw_starts(["a", "b", "c"], 7, seed=1)
    with pytest.raises(ValueError, match="at least one"):
        draw_starts(["a"], 0)


def test_play_budget_bounds_every_completion_and_ends_it_with_eos(tokenizer, fmt, pool):
    garbage = fmt.encode("no protocol here " * 20)  # no EOS: every turn is cut
    sampler = FixedTurns(garbage)
    tasks = load_tasks("builtin")
    envs = [make_env(tasks, max_steps=10, wrappers=()) for _ in range(2)]
    episodes = play_episodes(envs, [Start(TASK, 0)] * 2, sampler, fmt,
                             max_completion_length=1500, max_turn_tokens=40, pool=pool)
    for episode in episodes:
        assert len(episode.completion_ids) <= 1500 and episode.out_of_tokens
        assert episode.completion_ids[-1] == tokenizer.eos_token_id
        # every turn: 40 sampled ids (trained), then the appended EOS (not trained)
        trained = [i for i, m in enumerate(episode.env_mask) if m]
        assert len(trained) == 40 * len(episode.actions)
        for end in (i for i in range(1, len(episode.env_mask))
                    if episode.env_mask[i - 1] == 1 and episode.env_mask[i] == 0):
            assert episode.completion_ids[end] == tokenizer.eos_token_id
        assert episode.penalty == pytest.approx(0.02 * len(episode.actions))
        assert len(episode.logprobs) == len(episode.completion_ids)
    assert all(n == 2 and budget <= 40 for n, budget in sampler.calls)
    for env in envs:
        env.close()


def test_play_forced_answer_prefill_is_in_context_but_not_trained(tokenizer, fmt, pool):
    tasks = load_tasks("builtin")
    answer = tasks.get(TASK).answer
    sampler = FixedTurns(fmt.encode(answer) + [tokenizer.eos_token_id])
    env = make_env(tasks, max_steps=3, wrappers=("forced",))  # reserve 3: forced at once
    (episode,) = play_episodes([env], [Start(TASK, 0)], sampler, fmt,
                               max_completion_length=4000, max_turn_tokens=16, pool=pool)
    prefill = fmt.encode("FINAL ANSWER: ")
    assert episode.actions == [f"FINAL ANSWER: {answer}"]
    assert episode.completion_ids[:len(prefill)] == prefill
    assert episode.env_mask == [0] * len(prefill) + [1] * (len(episode.env_mask) - len(prefill))
    assert episode.correct is True and episode.correctness == 1.0
    env.close()


class BrokenSandbox:
    """A sandbox whose staging always fails (an infrastructure fault)."""

    name = "broken"

    def stage(self, files: Mapping[str, Any]) -> Any:
        raise SandboxError("disk full")

    def close(self) -> None:
        pass


def test_play_sandbox_fault_at_reset_is_an_unscorable_episode(tokenizer, fmt, pool):
    env = VeraEnv(load_tasks("builtin"), sandbox=BrokenSandbox())
    sampler = FixedTurns([tokenizer.eos_token_id])
    (episode,) = play_episodes([env], [Start(TASK, 0)], sampler, fmt,
                               max_completion_length=100, max_turn_tokens=8, pool=pool)
    assert episode.unscorable and "disk full" in episode.error
    assert episode.completion_ids == [tokenizer.eos_token_id] and episode.env_mask == [0]
    assert sampler.calls == []  # nothing to sample for


class StepFault:
    """A wrapper whose step raises: a bug or fault of one env mid-batch."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset(self, **kwargs: Any) -> Any:
        return self.env.reset(**kwargs)

    def step(self, action: str) -> Any:
        raise RuntimeError("env broke")


def test_play_env_fault_mid_episode_ends_that_episode_not_the_batch(tokenizer, fmt, pool):
    tasks = load_tasks("builtin")
    envs = [StepFault(make_env(tasks, max_steps=3, wrappers=())),
            make_env(tasks, max_steps=3, wrappers=())]
    sampler = FixedTurns(fmt.encode("hmm") + [tokenizer.eos_token_id])
    broken, healthy = play_episodes(envs, [Start(TASK, 0)] * 2, sampler, fmt,
                                    max_completion_length=8000, max_turn_tokens=8, pool=pool)
    assert broken.unscorable and broken.error == "error: RuntimeError: env broke"
    assert len(broken.actions) == 1
    assert not healthy.unscorable and len(healthy.actions) == 3 and not healthy.error


def test_play_fixed_width_samples_for_finished_episodes_too(tokenizer, fmt, pool):
    tasks = load_tasks("builtin")
    envs = [make_env(tasks, max_steps=1, wrappers=()), make_env(tasks, max_steps=3, wrappers=())]
    sampler = FixedTurns(fmt.encode("hmm") + [tokenizer.eos_token_id])
    rounds = iter([True, True, True, False])  # another process still plays two more rounds
    episodes = play_episodes(envs, [Start(TASK, 0)] * 2, sampler, fmt,
                             max_completion_length=8000, max_turn_tokens=8, pool=pool,
                             any_active=lambda local: next(rounds), fixed_width=True)
    assert [n for n, _ in sampler.calls] == [2, 2, 2]
    assert [len(e.actions) for e in episodes] == [1, 3]
    for env in envs:
        env.close()


def test_tokenize_transcript_labels_only_the_actions(tokenizer, fmt):
    observations, actions = ["first view", "second view"], ["<command>ls</command>", "FINAL ANSWER: 3"]
    ((ids, labels),) = tokenize_transcript(fmt, observations, actions)
    trained = [t for t, label in zip(ids, labels, strict=False) if label != IGNORE]
    assert all(label in (IGNORE, t) for t, label in zip(ids, labels, strict=False))
    assert tokenizer.decode(trained) == "<command>ls</command><|im_end|>FINAL ANSWER: 3<|im_end|>"
    assert "second view" in tokenizer.decode([t for t, label in zip(ids, labels, strict=False)
                                              if label == IGNORE])
    turns = tokenize_transcript(fmt, observations, actions, layout="turns")
    assert len(turns) == 2 and turns[1][0][:len(fmt.first("second view"))] == fmt.first("second view")
    with pytest.raises(ValueError, match="one observation per action"):
        tokenize_transcript(fmt, observations, actions[:1])


@pytest.mark.parametrize("template", ["qwen2_5.jinja", "qwen3.jinja"])
def test_chat_format_suffix_with_real_model_templates(tokenizer, template):
    # Qwen3 re-renders the earlier assistant turn (drops an empty <think>): the suffix
    # must still be exactly the template's user block and assistant header.
    import copy
    from pathlib import Path

    import trl

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = (Path(trl.__file__).parent / "chat_templates" / template).read_text()
    fmt = ChatFormat(tok)
    assert tok.decode(fmt.observation("obs two")) == \
        "\n<|im_start|>user\nobs two<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(fmt.first("obs one")).endswith("obs one<|im_end|>\n<|im_start|>assistant\n")


def test_tokenize_transcript_turns_context_is_the_evaluation_prompt_prefill_unlabelled(fmt,
                                                                                      tokenizer):
    from policies.chat import prompt_ids

    observations = ["QUESTION: q\nYour turn:", "QUESTION: q\nSTOP INVESTIGATING."]
    actions = ["<command>ls</command>", "FINAL ANSWER: 7"]
    (first, ids_first), (second, labels) = [
        (ids, labels) for ids, labels in tokenize_transcript(
            fmt, observations, actions, "turns", prefills=["", "FINAL ANSWER: "],
            system_prompt="S")]
    context = prompt_ids(tokenizer, observations[1], prefill="FINAL ANSWER: ",
                         system_prompt="S")
    assert second[:len(context)] == context
    assert all(label == IGNORE for label in labels[:len(context)])
    assert tokenizer.decode([t for t, label in zip(second, labels, strict=False) if label != IGNORE]) == (
        "7<|im_end|>")
    assert first[:len(prompt_ids(tokenizer, observations[0], system_prompt="S"))] == prompt_ids(
        tokenizer, observations[0], system_prompt="S")
