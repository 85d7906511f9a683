"""``--resume``: a run stopped mid-way continues from its last checkpoint.

GRPO: a tiny run of 4 steps, checkpointing every step, is stopped after its third
update and before that update's checkpoint (as a kill would stop it: the rollout dump
already holds the third generation's rows, the checkpoint does not), then resumed. The
resumed run must end at step 4 with every generation's rows in the dump once, the
curve going on from where the checkpoint left it, the task source's state restored,
and the parameters trained. One member of each group answers right, so groups carry a
gradient. SFT: a finished two-step run is extended to three steps by ``--resume``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
import torch
from stepwise_sampler import StepScripted
from training_turns import TWO_TURN_RUN, answer_at_once
from transformers import TrainerCallback

from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import make_task
from vera_env.training.arguments import parse_args
from vera_env.training.resume import CURVE, TASK_STATE, RunOptions, fit, keep_until, last_checkpoint, resume_point
from vera_env.training.samplers import trainer_sampler
from vera_env.training.scripts import grpo, sft

TASKS = ("tab.sentinel_mean.easy.s0", "seq.gc_content.easy.s0")
STEPS = 4
STOP_AT = 3


class Killed(Exception):
    """Stands in for SIGKILL: raised once the third update is done, before its save."""


class KillAfter(TrainerCallback):
    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if state.global_step == STOP_AT:
            raise Killed


class Remembering(TaskSource):
    """A task source with state: how many times its state was taken."""

    def __init__(self, tasks: list[Any]) -> None:
        super().__init__(tasks)
        self.saves = 0
        self.loaded: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        self.saves += 1
        return {"saves": self.saves}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.loaded, self.saves = state, state["saves"]


def _play(folder, tokenizer, *, resume: bool, callbacks=()):
    from vera_env.training.tiny import tiny_model

    tasks = Remembering([make_task(t) for t in TASKS])
    plans = answer_at_once(tasks)
    args = parse_args(grpo.Args, [
        *TWO_TURN_RUN, "--num-prompts", "4", "--train-steps", str(STEPS), "--save-steps", "1",
        "--output-dir", str(folder), "--dump-rollouts", str(folder / "dump.jsonl"),
        "--no-save-final", *(["--resume"] if resume else [])])
    model = tiny_model(tokenizer)
    trainer, rollout = grpo.build_trainer(args, tasks, model, tokenizer)
    rollout._sampler_factory = lambda t: StepScripted(trainer_sampler(t), tokenizer, plans,
                                                      first="Steps left: 2.", model_tokens=8)
    for callback in callbacks:
        trainer.add_callback(callback)
    try:
        fit(trainer, args.output_dir, resume=args.resume, tasks=tasks)
    finally:
        rollout.close()
    return trainer, tasks, model


@pytest.fixture(scope="module")
def resumed(tokenizer, tmp_path_factory):
    from vera_env.training.tiny import tiny_model

    folder = tmp_path_factory.mktemp("resume")
    initial = {n: p.detach().clone() for n, p in tiny_model(tokenizer).named_parameters()}
    with pytest.raises(Killed):
        _play(folder, tokenizer, resume=False, callbacks=[KillAfter()])
    stopped = {"checkpoint": last_checkpoint(folder),
               "dump_steps": {json.loads(line)["step"]
                              for line in (folder / "dump.jsonl").read_text().splitlines()}}
    trainer, tasks, model = _play(folder, tokenizer, resume=True)
    return {"folder": folder, "initial": initial, "stopped": stopped, "trainer": trainer,
            "tasks": tasks, "model": model}


def test_resume_killed_grpo_run_ends_at_the_planned_step(resumed):
    assert resumed["stopped"]["checkpoint"].name == f"checkpoint-{STOP_AT - 1}"
    assert resumed["trainer"].state.global_step == STEPS
    assert last_checkpoint(resumed["folder"]).name == f"checkpoint-{STEPS}"


def test_resume_keeps_only_the_newest_checkpoints(resumed):
    # --save-total-limit defaults to 2: a long run does not fill the disk.
    kept = sorted(p.name for p in resumed["folder"].glob("checkpoint-*"))
    assert kept == sorted([f"checkpoint-{STEPS - 1}", f"checkpoint-{STEPS}"])


def test_checkpoint_policy_keywords():
    assert RunOptions(save_steps=5).checkpointing() == {
        "save_strategy": "steps", "save_steps": 5, "save_total_limit": 2}
    assert RunOptions(save_steps=5, save_total_limit=0).checkpointing()["save_total_limit"] is None
    assert RunOptions().checkpointing() == {"save_strategy": "no"}
    with pytest.raises(ValueError, match="save_total_limit"):
        RunOptions(save_steps=5, save_total_limit=-1).checkpointing()


def test_resume_dump_has_every_generation_once_appended(resumed):
    # The killed run had written the third generation's rows past its last checkpoint.
    assert resumed["stopped"]["dump_steps"] == {0, 1, 2}
    records = [json.loads(line)
               for line in (resumed["folder"] / "dump.jsonl").read_text().splitlines()]
    episodes = {}
    for record in records:
        episodes.setdefault(record["episode"], set()).add(record["step"])
    assert sorted(episodes) == list(range(2 * STEPS))  # numbered on, none twice
    assert all(len(steps) == 1 for steps in episodes.values())
    per_step = Counter(next(iter(s)) for s in episodes.values())
    assert per_step == {step: 2 for step in range(STEPS)}  # two episodes per generation


def test_resume_curve_continues_from_the_checkpoint(resumed):
    lines = [json.loads(line) for line in (resumed["folder"] / CURVE).read_text().splitlines()]
    assert [r["step"] for r in lines if "loss" in r] == list(range(1, STEPS + 1))
    logged = [h["step"] for h in resumed["trainer"].state.log_history if "loss" in h]
    assert logged == list(range(1, STEPS + 1))  # the checkpoint's history, then the new steps


def test_resume_restores_task_source_state_and_saves_it_on(resumed):
    assert resumed["tasks"].loaded == {"saves": STOP_AT - 1}
    last = json.loads((resumed["folder"] / f"checkpoint-{STEPS}" / TASK_STATE).read_text())
    assert last == {"saves": STEPS}


def test_resume_parameters_trained(resumed):
    after = dict(resumed["model"].named_parameters())
    changed = [n for n, p in resumed["initial"].items() if not torch.equal(p, after[n].detach())]
    assert changed


def test_resume_without_checkpoint_says_how_to_make_one(tmp_path, tokenizer):
    with pytest.raises(SystemExit, match="--save-steps"):
        fit(object(), tmp_path, resume=True)


def test_fresh_run_into_a_folder_with_checkpoints_is_refused(tmp_path):
    (tmp_path / "checkpoint-300").mkdir()
    with pytest.raises(SystemExit, match="pass --resume to continue it"):
        resume_point(tmp_path, resume=False)
    (tmp_path / "checkpoint-300" / "trainer_state.json").write_text('{"global_step": 300}')
    (tmp_path / "checkpoint-20").mkdir()
    assert resume_point(tmp_path, resume=True) == (tmp_path / "checkpoint-300", 300)


def test_keep_until_drops_later_steps_and_a_line_cut_short(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"step": 0}\n{"step": 2}\n{"step": 1}\n{"step": 3, "x": "cut sh')
    assert keep_until(path, 2) == [{"step": 0}, {"step": 1}]
    assert path.read_text() == '{"step": 0}\n{"step": 1}\n'


def test_sft_resume_extends_a_finished_run(tmp_path):
    rows = tmp_path / "rows.jsonl"
    row = {"task_id": "t", "status": "ok", "correct": True, "unscorable": False,
           "verification_reward": 0.5, "prefills": ["", ""],
           "observations": ["QUESTION: how many?", "QUESTION: how many? (answer now)"],
           "actions": ["<command>wc -l values.tsv</command>", "FINAL ANSWER: 3"]}
    rows.write_text("".join(json.dumps(row) + "\n" for _ in range(4)))
    flags = ["--tiny", "--rollouts", str(rows), "--gradient-accumulation-steps", "1",
             "--save-steps", "1", "--output-dir", str(tmp_path / "sft")]
    sft.main(parse_args(sft.Args, [*flags, "--train-steps", "2"]))
    trainer = sft.main(parse_args(sft.Args, [*flags, "--train-steps", "3", "--resume"]))
    assert trainer.state.global_step == 3
    curve = [json.loads(line) for line in (tmp_path / "sft" / CURVE).read_text().splitlines()]
    assert [r["step"] for r in curve if "loss" in r] == [1, 2, 3]
