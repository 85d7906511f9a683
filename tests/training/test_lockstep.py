"""The one lockstep loop in both packings: the evaluation's prompts step-wise, the
concatenated episode with the env's tokens masked, budgets, faults as statuses."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from vera_env import VeraEnv
from vera_env.errors import SandboxError
from vera_env.policies.chat import prompt_ids
from vera_env.tasks import TaskSource, load_tasks
from vera_env.tasks.builtin import make_task
from vera_env.training.envs import EnvOptions, make_env
from vera_env.training.lockstep import play_lockstep
from vera_env.training.packing import make_packing
from vera_env.training.starts import Start
from vera_env.training.teacher import BriefTeacher
from vera_env.training.transcripts import ChatFormat

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


def play(envs, starts, sample, tokenizer, *, layout="stepwise", max_turn_tokens=64,
         max_completion_length=4096, system_prompt="", **kwargs):
    packing = make_packing(layout, tokenizer, [tokenizer.eos_token_id],
                           max_turn_tokens=max_turn_tokens,
                           max_completion_length=max_completion_length,
                           system_prompt=system_prompt)
    with ThreadPoolExecutor(4) as pool:
        return play_lockstep(envs, starts, sample, packing, tokenizer, pool=pool, **kwargs)


def test_play_lockstep_stepwise_prompts_are_the_evaluation_prompts_with_prefill(tokenizer, tasks):
    env = make_env(tasks, EnvOptions(env_max_steps=2, wrappers=("forced",), reserve=1))
    sample = Replies(tokenizer, ["<command>wc -l values.tsv</command>", "7"])
    (episode,) = play([env], [Start(TASK, 0)], sample, tokenizer, system_prompt="Be brief.")
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


def test_play_lockstep_stepwise_cut_turn_is_marked_and_kept_as_sampled(tokenizer, tasks):
    env = make_env(tasks, EnvOptions(env_max_steps=1, wrappers=()))
    sample = Replies(tokenizer, ["<command>cat values.tsv | sort | uniq -c | head</command>"],
                     cut_after=50)
    (episode,) = play([env], [Start(TASK, 0)], sample, tokenizer, max_turn_tokens=4)
    env.close()
    (turn,) = episode.turns
    assert turn.cut and len(turn.completion_ids) == 4 and turn.error  # unclosed block


def test_play_lockstep_stepwise_sandbox_fault_excludes_only_that_episode(tokenizer, tasks):
    envs = [BrokenOnStep(make_env(tasks, EnvOptions(env_max_steps=3, wrappers=())), 2),
            make_env(tasks, EnvOptions(env_max_steps=3, wrappers=()))]
    sample = Replies(tokenizer, ["<command>ls</command>"] * 4 + ["FINAL ANSWER: 1"] * 2)
    broken, fine = play(envs, [Start(TASK, 0), Start(TASK, 0)], sample, tokenizer,
                        max_turn_tokens=32)
    for env in envs:
        getattr(env, "env", env).close()
    assert broken.attempt.status == "sandbox" and broken.excluded
    assert len(broken.turns) == 1 and "the sandbox died" in broken.attempt.error
    assert fine.attempt.status == "ok" and not fine.excluded and len(fine.turns) == 3
    assert broken.fields()["unscorable"] and not fine.fields()["unscorable"]
    assert broken.fields()["status"] == "sandbox" and "the sandbox died" in broken.fields()["error"]
    assert fine.fields()["status"] == "ok" and fine.fields()["error"] == ""


def test_play_lockstep_on_round_reports_each_round_and_the_episodes_still_playing(
        tokenizer, tasks):
    envs = [make_env(tasks, EnvOptions(env_max_steps=1, wrappers=())),
            make_env(tasks, EnvOptions(env_max_steps=2, wrappers=()))]
    sample = Replies(tokenizer, ["<command>ls</command>"] * 3)
    rounds: list[tuple[int, int]] = []
    play(envs, [Start(TASK, 0), Start(TASK, 1)], sample, tokenizer,
         on_round=lambda round_, live: rounds.append((round_, live)))
    for env in envs:
        env.close()
    assert rounds == [(1, 2), (2, 1)]


def test_brief_teacher_answers_and_its_line_count_pin_earns_nothing(tasks):
    from vera_env.rollout import run_episode

    env = make_env(tasks, EnvOptions(env_max_steps=3, wrappers=("forced",), reserve=1, observation_variant="compact"))
    attempt = run_episode(env, BriefTeacher(tasks), seed=0, task_id=TASK)
    env.close()
    assert attempt.correct and attempt.steps[0].action == "<command>cat codebook.txt | wc -l</command>"
    assert all(not s.error for s in attempt.steps)
    # A whole-file line count is a fingerprint of the data, not of the answer: it fails
    # an answer-preserving control (the codebook reworded), so it earns nothing.
    assert attempt.verification_reward == 0 and attempt.n_discriminating == 0


class BrokenSandbox:
    """A sandbox whose staging always fails (an infrastructure fault)."""

    name = "broken"

    def stage(self, files: Mapping[str, Any]) -> Any:
        raise SandboxError("disk full")

    def close(self) -> None:
        pass


@pytest.mark.parametrize("layout", ["stepwise", "episode"])
def test_play_lockstep_sandbox_fault_at_reset_is_an_excluded_episode_in_both_layouts(
        tokenizer, layout):
    env = VeraEnv(load_tasks("builtin"), sandbox=BrokenSandbox())
    sample = Replies(tokenizer, [])
    (episode,) = play([env], [Start("seq.gc_content.easy.s0", 0)], sample, tokenizer,
                      layout=layout)
    assert episode.attempt.status == "sandbox" and "disk full" in episode.attempt.error
    assert episode.excluded and episode.turns == [] and sample.contexts == []


def test_play_lockstep_fixed_width_samples_for_finished_episodes_too(tokenizer, tasks):
    envs = [make_env(tasks, EnvOptions(env_max_steps=1, wrappers=())),
            make_env(tasks, EnvOptions(env_max_steps=3, wrappers=()))]
    sample = Replies(tokenizer, ["hmm"] * 6)
    rounds = iter([True, True, True, False])  # another process still plays two more rounds
    episodes = play(envs, [Start(TASK, 0)] * 2, sample, tokenizer,
                    any_active=lambda local: next(rounds), fixed_width=True)
    for env in envs:
        env.close()
    assert len(sample.contexts) == 6  # two contexts each round, finished or not
    assert [len(e.turns) for e in episodes] == [1, 3]


def test_play_lockstep_episode_layout_masks_the_env_and_keeps_sampled_ids(tokenizer, tasks):
    fmt = ChatFormat(tokenizer)
    env = make_env(tasks, EnvOptions(env_max_steps=3, wrappers=("forced",), reserve=1))
    sample = Replies(tokenizer, ["<command>wc -l values.tsv</command>", "no block here", "7"])
    (episode,) = play([env], [Start(TASK, 0)], sample, tokenizer, layout="episode")
    env.close()
    first, second, forced = episode.turns
    # Each turn is sampled from the episode so far: the previous context, the turn as
    # sampled, then the observation (and a forced answer's prefill) as the template has it.
    assert first.prompt_ids == prompt_ids(tokenizer, first.observation)
    assert second.prompt_ids == (first.prompt_ids + first.completion_ids
                                 + fmt.observation(second.observation))
    assert forced.prompt_ids[-len(fmt.encode("FINAL ANSWER: ")):] == fmt.encode("FINAL ANSWER: ")
    assert sample.contexts == [t.prompt_ids for t in episode.turns]
    packing = make_packing("episode", tokenizer, [tokenizer.eos_token_id], max_turn_tokens=64)
    (packed,) = packing.samples(episode.turns, [0.5] * 3)
    assert packed.prompt_ids == first.prompt_ids and packed.advantage == 0.5
    assert packed.completion_ids == forced.prompt_ids[len(first.prompt_ids):] + forced.completion_ids
    trained = [t for t, m in zip(packed.completion_ids, packed.mask, strict=True) if m]
    assert trained == first.completion_ids + second.completion_ids + forced.completion_ids
    masked = tokenizer.decode([t for t, m in zip(packed.completion_ids, packed.mask, strict=True)
                               if not m])
    assert second.observation in masked and "FINAL ANSWER: " in masked
    assert episode.attempt.answer == "7" and not episode.out_of_tokens


def test_play_lockstep_episode_layout_budget_ends_episodes_and_closes_cut_turns(tokenizer, tasks):
    envs = [make_env(tasks, EnvOptions(env_max_steps=10, wrappers=())) for _ in range(2)]
    sample = Replies(tokenizer, ["no protocol here " * 20] * 20, cut_after=40)
    episodes = play(envs, [Start(TASK, 0)] * 2, sample, tokenizer, layout="episode",
                    max_turn_tokens=40, max_completion_length=1500)
    for env in envs:
        env.close()
    packing = make_packing("episode", tokenizer, [tokenizer.eos_token_id], max_turn_tokens=40,
                           max_completion_length=1500)
    for episode in episodes:
        assert episode.out_of_tokens and episode.fields()["out_of_tokens"]
        assert 1 < len(episode.turns) < 10 and all(t.cut for t in episode.turns)
        assert episode.attempt.status == "max_steps" and not episode.excluded
        (packed,) = packing.samples(episode.turns, [0.0] * len(episode.turns))
        assert len(packed.completion_ids) <= 1500
        # every turn: 40 sampled ids (trained), then an appended EOS (not trained)
        assert sum(packed.mask) == 40 * len(episode.turns)
        closes = [i for i in range(1, len(packed.mask)) if packed.mask[i - 1] and not packed.mask[i]]
        assert len(closes) == len(episode.turns)
        assert all(packed.completion_ids[i] == tokenizer.eos_token_id for i in closes)
        assert packed.completion_ids[-1] == tokenizer.eos_token_id


def test_make_packing_rejects_bad_budgets_and_layouts(tokenizer):
    with pytest.raises(ValueError, match="max_turn_tokens >= 1"):
        make_packing("stepwise", tokenizer, [tokenizer.eos_token_id], max_turn_tokens=0)
    with pytest.raises(ValueError, match="layout must be"):
        make_packing("concat", tokenizer, [tokenizer.eos_token_id], max_turn_tokens=8)


def test_stepwise_prompt_fits_the_model_window_keeping_question_and_cue(tokenizer):
    """A turn's prompt is fitted to the model's window less the turn's room: the
    observation is clipped in the middle, so the question and the cue survive (a printed
    matrix once made an 11,676-token prompt for an 8,192-position model)."""
    from vera_env.policies.chat import prompt_ids

    observation = ("QUESTION: How many cells?\n\n"
                   + "\n".join(f"{i} {i % 97} {i * 7 % 113}" for i in range(3000))
                   + "\n\nYour turn:")
    unbounded = make_packing("stepwise", tokenizer, [tokenizer.eos_token_id], max_turn_tokens=64)
    bounded = make_packing("stepwise", tokenizer, [tokenizer.eos_token_id], max_turn_tokens=64,
                           max_context_tokens=1024)
    full, _ = unbounded.context([], observation, "")
    ids, room = bounded.context([], observation, "FINAL ANSWER: ")
    assert len(full) > 1024 and room == 64
    assert 1024 - 64 - 60 <= len(ids) <= 1024 - 64  # fitted, not gutted
    text = tokenizer.decode(ids)
    assert "QUESTION: How many cells?" in text and text.rstrip().endswith("FINAL ANSWER:")
    assert "Your turn:" in text
    short = "QUESTION: q\n\nYour turn:"
    assert prompt_ids(tokenizer, short, max_tokens=1024) == prompt_ids(tokenizer, short)
