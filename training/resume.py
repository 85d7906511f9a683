"""Training that survives a session: checkpoints, ``--resume``, and the logged curve.

A learning run on two CPU cores spans several sittings, so ``vera_env.training.scripts.grpo`` and
``vera_env.training.scripts.sft`` checkpoint every ``--save-steps`` optimizer steps and ``--resume``
continues from the last checkpoint in ``--output-dir``. What continues, and who keeps it:

* the global step, optimizer, scheduler and RNG states: transformers'
  ``Trainer.train(resume_from_checkpoint=...)`` (it also skips the batches the run
  already consumed, so the task starts go on where they stopped);
* the task source's state (a curriculum's pass rates), when the source has
  ``state_dict``/``load_state_dict`` (``Stateful``): saved as ``curriculum.json`` in
  each checkpoint, loaded back before training resumes;
* the logged curve, ``curve.jsonl`` in the output folder (one JSON line per log), and
  the rollout dump (``vera_env.training.dump``): both appended. A run killed after its last
  checkpoint has already written lines for the steps it will play again; they are cut
  first (``keep_until``), so every step is in the file once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from vera_env.training.arguments import ReportTo

__all__ = ["CURVE", "TASK_STATE", "RunOptions", "Stateful", "fit", "keep_until",
           "last_checkpoint", "resume_point", "resume_step"]

CURVE = "curve.jsonl"
"""The logged curve, in the output folder: one JSON object per log, with its ``step``."""
TASK_STATE = "curriculum.json"
"""The task source's ``state_dict``, in each checkpoint folder."""


@dataclass
class RunOptions:
    """The options every training script shares (a dataclass base of their ``Args``)."""

    trainable_layers: int = 0
    """Train only the top N decoder layers (and the final norm); 0 trains all. A CPU knob."""
    bf16: bool = False
    """Train in bfloat16 (GPU)."""
    activation_checkpointing: bool = False
    """Recompute activations in the backward pass (long episodes on a small GPU)."""
    logging_steps: int = 1
    """Log every this many optimizer steps."""
    report_to: ReportTo = "none"
    """Where to report metrics: none, tensorboard, wandb."""
    save_steps: int = 0
    """Save a checkpoint (model, optimizer, scheduler, RNG, task source state) every
    this many optimizer steps into output_dir/checkpoint-N; 0 saves none."""
    save_total_limit: int = 2
    """Keep only the newest N checkpoints (0 keeps all): one of SmolLM2-135M with every
    layer trained is 1.6 GB with its optimizer, so 300 GRPO steps saved every 5 would
    fill 96 GB of disk."""
    resume: bool = False
    """Continue from the last checkpoint in output_dir: its step count, optimizer, RNG
    and task source state; the curve and the rollout dump are appended."""

    def checkpointing(self) -> dict[str, Any]:
        """The ``TrainingArguments`` keywords of these options' checkpoint policy."""
        if self.save_steps < 0:
            raise ValueError(f"save_steps must be >= 0, got {self.save_steps}")
        if self.save_total_limit < 0:
            raise ValueError(f"save_total_limit must be >= 0, got {self.save_total_limit}")
        if not self.save_steps:
            return {"save_strategy": "no"}
        return {"save_strategy": "steps", "save_steps": self.save_steps,
                "save_total_limit": self.save_total_limit or None}


@runtime_checkable
class Stateful(Protocol):
    """A task source whose state must survive a resume (``vera_env.tasks.Curriculum``)."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def last_checkpoint(output_dir: str | Path) -> Path | None:
    """The ``checkpoint-N`` folder with the largest N in ``output_dir`` (None if none)."""
    folder = Path(output_dir)
    found = [(int(p.name.split("-", 1)[1]), p) for p in folder.glob("checkpoint-*")
             if p.is_dir() and p.name.split("-", 1)[1].isdigit()]
    return max(found)[1] if found else None


def resume_step(checkpoint: Path) -> int:
    """The global step a checkpoint was saved at (its ``trainer_state.json``).

    Raises:
        SystemExit: The folder holds no trainer state (a save cut short): delete it to
            resume from the one before.
    """
    state = checkpoint / "trainer_state.json"
    if not state.is_file():
        raise SystemExit(f"{checkpoint} has no trainer_state.json (a save cut short?); "
                         "delete it to resume from the checkpoint before")
    return int(json.loads(state.read_text(encoding="utf-8"))["global_step"])


def keep_until(path: Path, step: int) -> list[dict[str, Any]]:
    """Cut a JSONL file to its records with ``record["step"] < step``; returns them.

    What a killed run wrote after its last checkpoint is played again on resume, so it
    goes. A last line cut short by the kill is dropped too.
    """
    if not path.is_file():
        return []
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # the kill cut the line short
        if isinstance(record, dict) and int(record.get("step", 0)) < step:
            kept.append(record)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept),
                    encoding="utf-8")
    return kept


def _recorder(output_dir: Path, tasks: object) -> Any:
    """A ``TrainerCallback`` appending logs to the curve, saving the task source's state."""
    from transformers import TrainerCallback  # noqa: PLC0415 - the training extra

    class RunRecorder(TrainerCallback):  # type: ignore[misc]
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None,
                   **_: Any) -> None:
            if state.is_world_process_zero and logs:
                with (output_dir / CURVE).open("a", encoding="utf-8") as out:
                    out.write(json.dumps({"step": state.global_step, **logs}) + "\n")

        def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if state.is_world_process_zero and isinstance(tasks, Stateful):
                folder = output_dir / f"checkpoint-{state.global_step}"
                (folder / TASK_STATE).write_text(json.dumps(tasks.state_dict()),
                                                 encoding="utf-8")

    return RunRecorder()


def resume_point(output_dir: str | Path, resume: bool) -> tuple[Path | None, int]:
    """The checkpoint to resume from and its global step; ``(None, 0)`` when not resuming.

    A fresh run refuses a folder that holds checkpoints: a later ``--resume`` would take
    the largest step, which may be an older, longer run's.

    Raises:
        SystemExit: ``resume`` with no checkpoint in ``output_dir``, or a fresh run
            into a folder with checkpoints.
    """
    checkpoint = last_checkpoint(output_dir)
    if not resume:
        if checkpoint is not None:
            raise SystemExit(f"{output_dir} holds checkpoints of an earlier run "
                             f"({checkpoint.name}): pass --resume to continue it, or "
                             "choose another --output-dir")
        return None, 0
    if checkpoint is None:
        raise SystemExit(f"--resume: no checkpoint-N folder in {output_dir}; train with "
                         "--save-steps N first")
    return checkpoint, resume_step(checkpoint)


def fit(trainer: Any, output_dir: str | Path, *, resume: bool, tasks: object = None) -> None:
    """Train ``trainer``, from the last checkpoint when ``resume``; record the curve.

    Args:
        trainer: A transformers ``Trainer`` (GRPO or SFT).
        output_dir: Its output folder (checkpoints, ``curve.jsonl``).
        resume: Continue from the last checkpoint (the curve is cut to the steps it
            holds, then appended); otherwise the curve starts afresh.
        tasks: The task source; its state is saved and restored when it is ``Stateful``.

    Raises:
        SystemExit: ``resume`` with no checkpoint in ``output_dir``, or a checkpoint
            without the task source's state.
    """
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    checkpoint, step = resume_point(folder, resume)
    if checkpoint is None:
        (folder / CURVE).unlink(missing_ok=True)
    else:
        keep_until(folder / CURVE, step + 1)  # a log's step is the update it follows
        if isinstance(tasks, Stateful):
            state = checkpoint / TASK_STATE
            if not state.is_file():
                raise SystemExit(f"{checkpoint} has no {TASK_STATE} (a save cut short?); "
                                 "delete it to resume from the checkpoint before")
            tasks.load_state_dict(json.loads(state.read_text(encoding="utf-8")))
    trainer.add_callback(_recorder(folder, tasks))
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
