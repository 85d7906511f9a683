"""A teacher of the protocol's mechanics in short turns, for small models on small budgets.

Why this exists. The builtin tasks' reference solutions (``OraclePolicy``) are the
right thing to imitate, but their turns are long: 150–700 SmolLM2 tokens each
(measured over the 13 easy types), and on the 2 shared CPU cores this project's
real-model benchmark runs on, a 256-token turn took 29–50 s to sample. A 135M model
fine-tuned on them writes turns that a 128-token cap cuts in the middle of a
``<command>`` block — a format error every turn, so GRPO sees no variance. This
teacher shows the same mechanics in three short turns that the harness verifies for
real: run a command, declare what its output showed as a node with a check that would
fail on other data, answer. It reads the measured number from the observation's
command window — the way a model must — so its turns are right only because the
output was read; it answers with the task's reference answer (a privileged teacher,
like the oracle), and the answer turn continues the forced prefill when there is one.

    python -m vera_env.training.scripts.collect --policy brief --observation-variant compact ...
"""

from __future__ import annotations

import re
from typing import Any

from vera_env import info as keys
from vera_env.tasks import TaskSource

__all__ = ["BriefTeacher", "count_command", "first_data_file"]


def first_data_file(task: Any) -> str:
    """The task's first data file that is not a README (what the compact rules name)."""
    if task.data_dir is None:
        raise ValueError(f"task {task.id!r} has no data files to count")
    files: list[str] = sorted(p.relative_to(task.data_dir).as_posix()
                   for p in task.data_dir.rglob("*") if p.is_file())
    data = [f for f in files if not f.upper().startswith("README")] or files
    if not data:
        raise ValueError(f"task {task.id!r} has an empty data folder")
    return data[0]


def count_command(file: str) -> str:
    """The shell that prints ``file``'s line count (decompressing ``.gz``)."""
    quoted = file if " " not in file else f"'{file}'"
    return f"zcat {quoted} | wc -l" if file.endswith(".gz") else f"cat {quoted} | wc -l"


class BriefTeacher:
    """Count a data file's lines, declare the count with a check, answer.

    It teaches the protocol's mechanics, not analysis: a whole-file line count is a
    fingerprint of the data, which fails an answer-preserving control and so earns no
    verification reward — only the answer pays.

    Stateless across calls (the turn is chosen by ``info["step"]`` and the
    observation), so one instance serves many concurrent episodes.

    Args:
        tasks: The task source the environment draws from (for files and answers).
    """

    def __init__(self, tasks: TaskSource) -> None:
        self._tasks = tasks

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next short turn."""
        task = self._tasks.get(info[keys.TASK_ID])
        prefill = str(info.get(keys.PREFILL) or "")
        if prefill:
            return prefill + str(task.answer)
        file = first_data_file(task)
        command = count_command(file)
        count = _measured(observation, command)
        if count is None:
            return f"<command>{command}</command>"
        if int(info[keys.STEP]) <= 1 and "(checks" not in observation:
            return (f'NODE kind=load summary="{file} has {count} lines" artifact={file}\n'
                    f'CHECK range "{count} lines" :: test "$({command})" -eq {count} '
                    "&& echo True || echo False")
        return f"FINAL ANSWER: {task.answer}"


def _measured(observation: str, command: str) -> int | None:
    """The number printed right after ``$ command`` in the observation's window."""
    found = re.findall(re.escape(f"$ {command}") + r"\n\s*(\d+)\b", observation)
    return int(found[-1]) if found else None
