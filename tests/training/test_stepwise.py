"""The step-wise episode loop: prompts through the shared chat path, faults as statuses."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from policies.chat import prompt_ids
from training.envs import make_env
from training.episodes import Start
from training.stepwise import play_stepwise
from training.teacher import BriefTeacher
from vera_env.errors import SandboxError
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import make_task

TASK = "tab.sentinel_mean.easy.s0"


class Replies:
    """A sampler that answers every context with the next scripted text (then EOS)."""

    def __init__(self, tokenizer, texts, *, cut_after=None):
        self.tokenizer, self.texts, self.cut_after = tokenizer, list(texts), cut_after
        self.contexts: list[list[int]] = []

    def __call__(self, contexts, max_new_tokens):
        self.contexts.extend(contexts)
        out = []
        for _ in contexts:
            ids = self.tokenizer.encode(self.texts.pop(0), add_special_tokens=False)
            ids = ids[: self.cut_after] if self.cut_after else ids + [self.tokenizer.eos_token_id]
            out.append((ids, None))
        return out


class BrokenOnStep:
    """Wraps an env; its ``n``-th step raises a sandbox fault."""

    def __init__(self, env, n):
        self.env, self.n, self.steps = env, n, 0

    def reset(self, **kwargs):
        return self.env.reset(**kwargs)

    def step(self, action):
        self.steps += 1
        if self.steps == self.n:
            raise SandboxError("the sandbox died")
        return self.env.step(action)


@pytest.fixture
def tasks():
    return TaskSource([make_task(TASK)])


def test_play_stepwise_prompts_are_the_evaluation_prompts_with_prefill(tokenizer, tasks):
    env = make_env(tasks, max_steps=2, wrappers=("forced",), reserve=1)
    sample = Replies(tokenizer, ["<command>wc -l values.tsv</command>", "7"])
    with ThreadPoolExecutor(2) as pool:
        (episode,) = play_stepwise([env], [Start(TASK, 0)], sample, tokenizer,
                                   [tokenizer.eos_token_id], max_turn_tokens=64, pool=pool,
                                   system_prompt="Be brief.")
    env.close()
    first, forced = episode.turns
    assert first.prefill == "" and forced.prefill == "FINAL ANSWER: "
    for turn in episode.turns:
        assert turn.prompt_ids == prompt_ids(tokenizer, turn.observation, prefill=turn.prefill,
                                             system_prompt="Be brief.")
    assert sample.contexts == [first.prompt_ids, forced.prompt_ids]
    assert forced.action == "FINAL ANSWER: 7" and episode.attempt.answer == "7"
    assert episode.attempt.status == "ok" and not episode.excluded
    assert episode.fields()["correctness"] == 0.0 and episode.fields()["n_turns"] == 2


def test_play_stepwise_cut_turn_is_marked_and_kept_as_sampled(tokenizer, tasks):
    env = make_env(tasks, max_steps=1, wrappers=())
    sample = Replies(tokenizer, ["<command>cat values.tsv | sort | uniq -c | head</command>"],
                     cut_after=50)
    with ThreadPoolExecutor(1) as pool:
        (episode,) = play_stepwise([env], [Start(TASK, 0)], sample, tokenizer,
                                   [tokenizer.eos_token_id], max_turn_tokens=4, pool=pool)
    env.close()
    (turn,) = episode.turns
    assert turn.cut and len(turn.completion_ids) == 4 and turn.error  # unclosed block


def test_play_stepwise_sandbox_fault_excludes_only_that_episode(tokenizer, tasks):
    envs = [BrokenOnStep(make_env(tasks, max_steps=3, wrappers=()), 2),
            make_env(tasks, max_steps=3, wrappers=())]
    sample = Replies(tokenizer, ["<command>ls</command>"] * 4 + ["FINAL ANSWER: 1"] * 2)
    with ThreadPoolExecutor(2) as pool:
        broken, fine = play_stepwise(envs, [Start(TASK, 0), Start(TASK, 0)], sample, tokenizer,
                                     [tokenizer.eos_token_id], max_turn_tokens=32, pool=pool)
    for env in envs:
        getattr(env, "env", env).close()
    assert broken.attempt.status == "sandbox" and broken.excluded
    assert len(broken.turns) == 1 and "the sandbox died" in broken.attempt.error
    assert fine.attempt.status == "ok" and not fine.excluded and len(fine.turns) == 3
    assert broken.fields()["unscorable"] and not fine.fields()["unscorable"]


def test_brief_teacher_answers_and_its_line_count_pin_earns_nothing(tasks):
    from vera_env.rollout import run_episode

    env = make_env(tasks, max_steps=3, wrappers=("forced",), reserve=1,
                   observation_variant="compact")
    attempt = run_episode(env, BriefTeacher(tasks), seed=0, task_id=TASK)
    env.close()
    assert attempt.correct and attempt.steps[0]["action"] == "<command>cat codebook.txt | wc -l</command>"
    assert all(not s["error"] for s in attempt.steps)
    # A whole-file line count is a fingerprint of the data, not of the answer: it fails
    # an answer-preserving control (the codebook reworded), so it earns nothing.
    assert attempt.verification_reward == 0 and attempt.n_discriminating == 0
