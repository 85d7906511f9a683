"""Fixtures for the training tests: a tokenizer trained here, tasks with real data.

Nothing is downloaded: the model is built from a config (``vera_env.training.tiny``), so the
tests run offline on CPU. They are skipped where the ``training`` extra is missing (under
CI, where ``make test`` installs it, they fail instead).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from extras import require

require("trl", "torch", "transformers", extra="training")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from vera_env.tasks import Task, TaskSource  # noqa: E402 (after the requirement and environment above)

VALUES = "".join(f"{i}\n" for i in range(1, 11))


@pytest.fixture(scope="session")
def tokenizer():
    from vera_env.training.tiny import tiny_tokenizer

    return tiny_tokenizer()


@pytest.fixture(scope="session")
def judged_task(tmp_path_factory: pytest.TempPathFactory) -> Task:
    """A task graded by an LLM judge; none is configured, so every answer is unscorable."""
    data = tmp_path_factory.mktemp("judged") / "data"
    data.mkdir()
    (data / "values.txt").write_text(VALUES)
    return Task(id="judged.values", question="Describe the values in values.txt.",
                answer="the integers 1 to 10", data_dir=Path(data),
                grader={"kind": "llm", "rubric": "Accept any description of 1..10."})



@pytest.fixture(scope="session")
def motif_tasks(judged_task: Task) -> tuple[Task, Task, TaskSource]:
    """A builtin task a scripted member can verify and answer, and the judged task
    (every answer unscorable): the two starts of the end-to-end GRPO runs."""
    from training_turns import MOTIF

    from vera_env.tasks.builtin import make_task

    motif = make_task(MOTIF)
    return motif, judged_task, TaskSource([motif, judged_task])
