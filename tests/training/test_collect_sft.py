"""Collect oracle rollouts through the real env, then expert iteration with SFTTrainer."""

from __future__ import annotations

import json
import math

import pytest
import torch

from vera_env.errors import PolicyError
from vera_env.rollout import Attempt
from vera_env.tasks import load_tasks
from vera_env.training.collection import collect, write_rows
from vera_env.training.envs import EnvOptions, make_env
from vera_env.training.scripts.sft import Args, sft_config
from vera_env.training.sft_data import load_rollouts, select_rows, to_examples
from vera_env.training.starts import Start
from vera_env.training.transcripts import IGNORE, ChatFormat

STARTS = [Start("seq.motif_count.easy.s0", 0), Start("vcf.het_count.easy.s0", 1)]


class DownEndpoint:
    """A model endpoint that is down: every call is a provider fault."""

    def act(self, observation: str, info: dict) -> str:
        raise PolicyError("connection refused")


@pytest.fixture(scope="module")
def rollouts(tokenizer, tmp_path_factory):
    from vera_env.policies import OraclePolicy

    tasks = load_tasks("builtin")
    fmt = ChatFormat(tokenizer)
    make = lambda: make_env(tasks, EnvOptions(env_max_steps=10, wrappers=("forced",)))  # noqa: E731
    steps: list[tuple[str, int]] = []
    rows = collect(tasks, OraclePolicy(tasks), STARTS, make_env_fn=make, concurrency=2,
                   policy_name="oracle", fmt=fmt,
                   on_step=lambda a: steps.append((a.task_id, len(a.steps))))
    rows += collect(tasks, DownEndpoint(), STARTS[:1], make_env_fn=make, policy_name="down",
                    fmt=fmt)
    folder = tmp_path_factory.mktemp("rollouts")
    return {"rows": rows, "jsonl": write_rows(rows, folder / "r.jsonl"),
            "parquet": write_rows(rows, folder / "r.parquet"), "fmt": fmt, "steps": steps}


def test_collect_rows_hold_task_turns_observations_rewards_and_attempt(rollouts):
    oracle, down = rollouts["rows"][:2], rollouts["rows"][2]
    for row, start in zip(oracle, STARTS, strict=False):
        assert row["task_id"] == start.task_id and row["status"] == "ok" and row["correct"]
        assert len(row["actions"]) == len(row["observations"]) == len(row["rewards"])
        assert row["observations"][0].startswith("QUESTION: " + row["question"])
        attempt = Attempt.from_json(row["attempt"])
        assert [s.action for s in attempt.steps] == row["actions"]
        assert sum(row["rewards"]) == pytest.approx(attempt.score)
        assert row["verification_reward"] > 0
        assert row["learn"] == [True] * len(row["actions"])  # no deliberate mistakes
    assert down["status"] == "provider" and down["actions"] == [] and down["input_ids"] == []


def test_collect_on_step_sees_every_turn_of_every_episode_as_it_is_played(rollouts):
    """What the progress lines of a slow model's collection are made of."""
    for row in rollouts["rows"][:2]:
        turns = [n for task, n in rollouts["steps"] if task == row["task_id"]]
        assert turns == list(range(1, len(row["actions"]) + 1))


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_collect_output_loads_with_datasets(rollouts, kind):
    from datasets import load_dataset

    data = load_dataset("json" if kind == "jsonl" else "parquet",
                        data_files=str(rollouts[kind]), split="train")
    assert data.num_rows == 3 and data[0]["input_ids"] == rollouts["rows"][0]["input_ids"]
    assert json.loads(data[1]["attempt"])["task_id"] == STARTS[1].task_id


def test_collect_labels_mask_every_observation_token(rollouts, tokenizer):
    row = rollouts["rows"][0]
    ids, labels = row["input_ids"], row["labels"]
    trained = tokenizer.decode([t for t, label in zip(ids, labels, strict=False) if label != IGNORE])
    masked = tokenizer.decode([t for t, label in zip(ids, labels, strict=False) if label == IGNORE])
    assert trained == "".join(a + "<|im_end|>" for a in row["actions"])
    for obs in row["observations"]:
        assert obs in masked


def test_sft_examples_leave_out_turns_marked_not_to_learn(rollouts, tmp_path):
    row = rollouts["rows"][0]
    marked = {**row, "learn": [False] + [True] * (len(row["actions"]) - 1)}
    (loaded,) = load_rollouts([write_rows([marked], tmp_path / "m.jsonl")])
    fmt = rollouts["fmt"]
    kept = to_examples([loaded], fmt, layout="turns")
    assert len(kept) == len(row["actions"]) - 1
    assert kept == to_examples([row], fmt, layout="turns")[1:]


def test_sft_selection_keeps_successes_and_drops_faults(rollouts):
    rows = load_rollouts([rollouts["jsonl"]])
    assert [r["task_id"] for r in select_rows(rows, "correct")] == [s.task_id for s in STARTS]
    assert select_rows(rows, "verified", min_verification=10.0) == []
    faulty = [{**rows[0], "unscorable": True}, rows[2]]
    assert select_rows(faulty, "either", min_verification=0.0) == []
    with pytest.raises(ValueError, match="select must be"):
        select_rows(rows, "best")


def test_sft_two_steps_on_oracle_rollouts_change_every_parameter(rollouts, tokenizer, tmp_path):
    from datasets import Dataset
    from trl import SFTTrainer

    from vera_env.training.tiny import tiny_model

    rows = select_rows(load_rollouts([rollouts["parquet"]]), "correct")
    examples = to_examples(rows, rollouts["fmt"], layout="turns")
    assert len(examples) == sum(len(r["actions"]) for r in rows)
    model = tiny_model(tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    args = Args(tiny=True, output_dir=str(tmp_path), train_steps=2, learning_rate=1e-2,
                gradient_accumulation_steps=1, per_device_train_batch_size=2)
    trainer = SFTTrainer(model=model, args=sft_config(args),
                         train_dataset=Dataset.from_list(examples), processing_class=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    for ids, labels in zip(batch["input_ids"].tolist(), batch["labels"].tolist(), strict=False):
        # the collator kept the labels: no loss on the observation (the prompt)
        start = next(i for i, label in enumerate(labels) if label != IGNORE)
        assert "QUESTION:" in tokenizer.decode(ids[:start]) and start > 100
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(float(x)) for x in losses)
    after = dict(model.named_parameters())
    assert [n for n, p in before.items() if torch.equal(p, after[n].detach())] == []
