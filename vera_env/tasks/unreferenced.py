"""What a task without a reference pays, and the one notice that says a suite has such tasks.

Why a rule. Strength tells a check that follows the answer from a fingerprint of the
data by re-running it on variants its task's reference classified: controls (answer
kept) and mutants (answer moved). Without a reference it can only re-serialise a file
(``FORMAT_TRANSFORMS``) and mutate it blindly, and a plain-text file's hash survives
that: on a small hand-written CSV + FASTA folder suite a red team's md5 and byte-count
pins earned 0.333, and a task-blind "snapshot now, compare later" macro 0.333, against
0.083 for the reference solution. A user's own suite is how an RL environment is mostly
used, so that gap would be trained into every policy that meets it.

The rule. **Verification earns only where strength can classify**: on a task with a
reference (a family's Python `Reference`, or the task file's ``reference`` program,
`vera_env.tasks.model.ReferenceProgram`) and a grader that can compare two answers
(not ``llm``). Elsewhere the checks still run and are recorded, and a passing check
gets ``discriminating=False`` with `NO_REFERENCE_DETAIL` (``without_reference``); the
answer's correctness is paid as usual. So a hash earns nothing, and neither does a
recount: nothing can tell them apart there.

Canaries and ``truncated`` perturbations (answer "cannot be determined", whatever the
data) have no reference on purpose -- every variant keeps their answer, so none is a
mutant -- and fall under the same rule: they pay for the declared "cannot be
determined", never for checks. They need no reference, so they are not announced;
``needs_reference`` is the test.

The notice. ``gym.make`` and ``vera-env eval`` build a `VeraEnv` (with strength on),
``vera-env tasks validate`` loads the suite and ``vera-env serve`` its splits
(`vera_env.serve.splits`), and each calls ``announce_unreferenced``: one ``UserWarning``
per suite per process (the pattern of the sandbox's one-time notices), naming how many
tasks lack a reference and how to add one. ``vera-env tasks validate --strict`` fails
on them. Only the tasks a source holds ready are counted: the named sources (builtin,
real, ...) make theirs on demand, each with its family's reference.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import replace

from vera_env.tasks.model import Task
from vera_env.tasks.source import TaskSource
from vera_env.tasks.undetermined import is_undetermined
from vera_env.verification.checks import CheckResult

__all__ = ["NO_REFERENCE_DETAIL", "UNREFERENCED_NOTICE", "announce_unreferenced",
           "classifiable", "needs_reference", "unreferenced", "without_reference"]

NO_REFERENCE_DETAIL = ("not discriminating: the task declares no reference, so strength "
                       "cannot tell what keeps its answer (verification earns nothing on it)")
"""The detail of a passing check on a task strength cannot classify."""

UNREFERENCED_NOTICE = (
    "{n} of {total} tasks in {source} declare no reference, so their checks earn no "
    "verification reward (correctness still counts): add \"reference\": {{\"command\": "
    "\"...\"}} or {{\"script\": \"reference.sh\"}}, a program that prints the answer from "
    "the task's files, to each task (docs/tasks.md, 'Writing your own'){examples}")
"""The one line that announces a suite's tasks without a reference."""

_announced: set[str] = set()
_lock = threading.Lock()


def classifiable(task: Task) -> bool:
    """Whether strength can classify the task's variants (a reference, a grader that
    compares two answers): only then can its checks earn."""
    has = task.reference is not None or task.reference_program is not None
    return has and task.grader.kind != "llm"


def needs_reference(task: Task) -> bool:
    """Whether the task lacks a reference it could have (not ``llm``-graded, its answer
    not "cannot be determined"): what the notice counts."""
    return (not classifiable(task) and task.grader.kind != "llm"
            and not is_undetermined(task.answer))


def unreferenced(tasks: Iterable[Task]) -> list[Task]:
    """The tasks among ``tasks`` that ``needs_reference``."""
    return [task for task in tasks if needs_reference(task)]


def announce_unreferenced(source: TaskSource) -> str:
    """Warn once per process and source if its ready tasks lack references.

    Returns:
        The notice (also when it was given before), or "" when every task has one.
    """
    ready = source.ready()
    missing = unreferenced(ready)
    if not missing:
        return ""
    examples = ", ".join(t.id for t in missing[:3]) + (", ..." if len(missing) > 3 else "")
    notice = UNREFERENCED_NOTICE.format(n=len(missing), total=len(ready), source=source.name,
                                        examples=f" (tasks {examples})")
    with _lock:
        fresh = notice not in _announced
        _announced.add(notice)
    if fresh:
        warnings.warn(notice, UserWarning, stacklevel=3)
    return notice


def without_reference(results: Sequence[CheckResult]) -> tuple[CheckResult, ...]:
    """``results`` with every passing check marked as not discriminating (the rule)."""
    return tuple(replace(r, discriminating=False, killed_by=(), evidence="",
                         detail=NO_REFERENCE_DETAIL) if r.passed else r for r in results)
