"""The vLLM sampler against a stand-in for TRL's ``vllm_generation`` (no GPU here)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from vera_env.tasks import load_tasks
from vera_env.training.envs import EnvOptions
from vera_env.training.lockstep import LockstepRollout
from vera_env.training.samplers import HFSampler, VLLMSampler, trainer_sampler


class FakeVLLMGeneration:
    """Records each call; answers like ``VLLMGeneration.generate`` with top-k logprobs."""

    def __init__(self) -> None:
        self.max_completion_length = 4096
        self.calls: list[dict] = []

    def generate(self, prompts, images, num_generations, profiler=None):
        self.calls.append({"prompts": prompts, "n": num_generations,
                           "cap": self.max_completion_length})
        completions = [[7, 8, 2] for _ in prompts]
        logprobs = [[[-0.1, -2.0], [None], [-0.3]] for _ in prompts]
        return prompts, completions, logprobs, None


def test_vllm_sampler_caps_the_turn_asks_one_sample_per_context_and_restores():
    generation = FakeVLLMGeneration()
    sampler = VLLMSampler(SimpleNamespace(vllm_generation=generation))
    turns = sampler([[1, 2], [1, 2], [3]], 64)
    assert generation.calls == [{"prompts": [[1, 2], [1, 2], [3]], "n": 1, "cap": 64}]
    assert generation.max_completion_length == 4096
    ids, logprobs = turns[0]
    assert ids == [7, 8, 2] and logprobs[0] == -0.1 and math.isnan(logprobs[1])


def test_trainer_sampler_follows_use_vllm():
    generation = FakeVLLMGeneration()
    assert isinstance(trainer_sampler(SimpleNamespace(use_vllm=True, vllm_generation=generation)),
                      VLLMSampler)
    hf = SimpleNamespace(use_vllm=False, eos_token_ids=[2],
                         processing_class=SimpleNamespace(pad_token_id=0))
    assert isinstance(trainer_sampler(hf), HFSampler)


def test_rollout_rejects_a_bad_budget_or_env_setting_before_training():
    tasks = load_tasks("builtin")
    with pytest.raises(ValueError, match="max_turn_tokens"):
        LockstepRollout(tasks, EnvOptions(env_max_steps=2).env_spec(), max_turn_tokens=0)
    spec = EnvOptions(env_max_steps=2).env_spec().model_copy(update={"sandbox": "nope"})  # unvalidated
    with pytest.raises(ValueError, match="nope"):
        LockstepRollout(tasks, spec)
