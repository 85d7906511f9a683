"""BioMysteryBench suites: ``problems.csv`` (or ``.parquet``) plus ``data/<id>.zip``.

The format: one row per problem with the columns ``id``, ``question``,
``answer_rubric`` (what a judge must see in an answer to score it 1.0; there is no exact
ground truth), ``allowed_domains`` (web domains a solver could consult) and
``human_solvable`` (``yes``/``no``); each problem's files are in ``data/<id>.zip``.

Why rows are checked at load and archives extracted on first use. A broken row (a
missing rubric, ``human_solvable = maybe``, a duplicate id, a zip that is missing or not
a zip, a member named ``../../etc/passwd``) must stop the run before any episode, with
the file, row and field named -- so every row is validated and every archive's member
list is read up front. Extracting is the expensive part (archives run to gigabytes), so
a task's archive is unpacked only when the task is first asked for, into the cache
(`vera_env.tasks.cache.extract_zip`: once per archive content, read-only), from where
the sandbox stages it by hard link.

Parquet needs ``pyarrow``, which is not a core dependency; without it a ``.parquet``
suite raises a `TaskFileError` that says what to install.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vera_env.errors import TaskFileError
from vera_env.tasks.cache import UnsafeArchiveError, archive_members, extract_zip
from vera_env.tasks.model import Task
from vera_env.tasks.source import TaskSource, UnknownTaskError

__all__ = ["PROBLEM_FILES", "REQUIRED_COLUMNS", "find_problems", "load_biomystery"]

PROBLEM_FILES = ("problems.csv", "problems.parquet")
REQUIRED_COLUMNS = ("id", "question", "answer_rubric", "human_solvable")
_YES, _NO = frozenset({"yes", "y", "true", "1"}), frozenset({"no", "n", "false", "0"})
_DOMAIN_SPLIT = re.compile(r"[\s,;]+")


def find_problems(path: str | Path) -> Path | None:
    """The problems table a path names: the file itself, or one inside the folder."""
    path = Path(path)
    if path.is_file() and path.name.startswith("problems.") and path.suffix in (".csv",
                                                                                ".parquet"):
        return path
    if path.is_dir():
        return next((path / n for n in PROBLEM_FILES if (path / n).is_file()), None)
    return None


def _csv_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) for each data row; ``where`` is ``<file>:<first line of the row>``."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        _check_columns(path, reader.fieldnames or [])
        start = reader.line_num + 1
        for row in reader:
            if None in row:  # more cells than header columns
                raise TaskFileError(f"{path}:{start}", "<row>",
                                    f"{len(row[None]) + len(row) - 1} cells for "
                                    f"{len(row) - 1} columns (an unquoted comma?)")
            yield f"{path}:{start}", row
            start = reader.line_num + 1


def _parquet_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    if importlib.util.find_spec("pyarrow") is None:
        raise TaskFileError(str(path), "<format>", "reading a .parquet problems table needs "
                                                   "pyarrow: pip install pyarrow (or save the "
                                                   "table as problems.csv)")
    import pyarrow.parquet as pq  # noqa: PLC0415 - optional dependency

    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise TaskFileError(str(path), "<format>", f"not a readable parquet file: {exc}") from exc
    _check_columns(path, table.column_names)
    for i, row in enumerate(table.to_pylist(), start=1):
        yield f"{path}:row {i}", row


def _check_columns(path: Path, names: Sequence[str]) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise TaskFileError(str(path), "<header>", f"missing column(s) {missing}; a "
                                                   f"BioMysteryBench table needs "
                                                   f"{list(REQUIRED_COLUMNS)} (and "
                                                   "optionally allowed_domains)")


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _solvable(value: Any, where: str, label: str) -> bool:
    if isinstance(value, bool):
        return value
    text = _text(value).lower()
    if text in _YES or text in _NO:
        return text in _YES
    raise TaskFileError(where, "human_solvable", f"expected yes or no, got {value!r}{label}")


def _domains(value: Any, where: str, label: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return tuple(_text(v) for v in value if _text(v))
    text = _text(value)
    if text.startswith("["):
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaskFileError(where, "allowed_domains", f"not a JSON list: {exc.msg}{label}"
                                ) from None
        return tuple(_text(v) for v in items if _text(v))
    return tuple(d for d in _DOMAIN_SPLIT.split(text) if d)


def _task(row: dict[str, Any], where: str) -> Task:
    task_id = _text(row.get("id"))
    label = f" (task {task_id!r})" if task_id else ""
    rubric = _text(row.get("answer_rubric"))
    for field, value in (("id", task_id), ("question", _text(row.get("question"))),
                         ("answer_rubric", rubric)):
        if not value:
            raise TaskFileError(where, field, f"empty; every problem needs one{label}")
    try:
        return Task(id=task_id, question=_text(row["question"]), answer=rubric,
                    grader={"kind": "llm", "rubric": rubric},
                    human_solvable=_solvable(row.get("human_solvable"), where, label),
                    allowed_domains=_domains(row.get("allowed_domains"), where, label),
                    tags=("biomysterybench",))
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in error["loc"]) or "<row>"
        raise TaskFileError(where, field, error["msg"].removeprefix("Value error, ") + label
                            ) from None


def _check_archive(archive: Path, where: str, task_id: str) -> None:
    if not archive.is_file():
        raise TaskFileError(where, "data", f"missing archive {archive} for task {task_id!r} "
                                           "(every problem's files are in data/<id>.zip)")
    try:
        with zipfile.ZipFile(archive) as handle:
            archive_members(handle)
    except zipfile.BadZipFile as exc:
        raise TaskFileError(str(archive), "data", f"not a zip archive: {exc}") from None
    except UnsafeArchiveError as exc:
        raise TaskFileError(str(archive), "data", f"unsafe archive for task "
                                                  f"{task_id!r}: {exc}") from None


def load_biomystery(path: str | Path) -> TaskSource:
    """Load a BioMysteryBench suite.

    Args:
        path: The suite folder (holding ``problems.csv`` or ``problems.parquet`` and
            ``data/``), or the problems file itself (``data/`` beside it).

    Returns:
        The tasks, graded by an LLM judge (``grader.kind == "llm"`` with the row's rubric
        as both ``rubric`` and ``answer``); archives are extracted on first ``get``.

    Raises:
        TaskFileError: No problems table; a missing column; a row with an empty id,
            question or rubric, a ``human_solvable`` that is not yes/no, a duplicate id;
            an archive that is missing, not a zip, or unsafe; no rows at all.
    """
    table = find_problems(path)
    if table is None:
        raise TaskFileError(str(path), "<suite>", f"no {' or '.join(PROBLEM_FILES)} found")
    data = table.parent / "data"
    rows = _parquet_rows(table) if table.suffix == ".parquet" else _csv_rows(table)
    tasks: dict[str, Task] = {}
    seen: dict[str, str] = {}
    for where, row in rows:
        task = _task(row, where)
        if task.id in seen:
            raise TaskFileError(where, "id", f"duplicate id {task.id!r} (also {seen[task.id]})")
        _check_archive(data / f"{task.id}.zip", where, task.id)
        seen[task.id], tasks[task.id] = where, task
    if not tasks:
        raise TaskFileError(str(table), "<file>", "no problems in the table")

    def extracted(task_id: str) -> Task:
        if task_id not in tasks:
            raise UnknownTaskError(f"no task {task_id!r} in {table}.")
        task = tasks[task_id]
        try:
            folder = extract_zip(task_id, data / f"{task_id}.zip")
        except (OSError, zipfile.BadZipFile, UnsafeArchiveError) as exc:
            raise TaskFileError(str(data / f"{task_id}.zip"), "data",
                                f"could not extract: {exc}") from exc
        return task.model_copy(update={"data_dir": folder})

    return TaskSource(name=str(table), ids=tuple(tasks), factory=extracted)
