"""Tasks: the schema, the loaders, the generated families, and where their data lives.

Import from here: ``from vera_env.tasks import Task, load_tasks``. Sources: folder suites
and JSONL (`loaders`), BioMysteryBench (`biomystery`), the builtin families (`builtin`,
loaded on first use -- ``load_tasks("builtin")`` -- so reading a suite does not pay for
them); `write_suite` writes any of them back as a folder suite; `Curriculum` serves a
source's tasks where a learner's pass rates are informative (``load_tasks("curriculum")``).
"""

from __future__ import annotations

from vera_env.tasks.biomystery import load_biomystery
from vera_env.tasks.cache import CACHE_ENV_VAR, cache_dir
from vera_env.tasks.curriculum import Curriculum, curriculum_source
from vera_env.tasks.export import write_suite
from vera_env.tasks.loaders import load_folder, load_jsonl, load_tasks
from vera_env.tasks.model import Task, Trap
from vera_env.tasks.source import OutcomeListener, TaskSource, UnknownTaskError
from vera_env.verification.grading import GraderSpec

__all__ = [
    "CACHE_ENV_VAR", "Curriculum", "GraderSpec", "OutcomeListener", "Task", "TaskSource", "Trap",
    "UnknownTaskError", "builtin_tasks", "cache_dir", "curriculum_source", "load_biomystery",
    "load_folder", "load_jsonl", "load_tasks", "write_suite",
]


def builtin_tasks() -> list[Task]:
    """The default builtin tasks; see `vera_env.tasks.builtin.builtin_tasks`."""
    from vera_env.tasks.builtin import builtin_tasks as _builtin_tasks  # noqa: PLC0415

    return _builtin_tasks()
