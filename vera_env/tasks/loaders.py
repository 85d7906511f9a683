"""Reading task suites from disk, and the `TaskSource` the env draws from.

Why errors are translated here. A suite is written by hand, and the person who broke it
needs to know *where*: which file, which task or line, which field. Pydantic knows the
field (its error locations), ``json`` knows the line and column, and only the loader
knows the file, so the loader joins the three into one ``TaskFileError(file, field,
message)`` -- raised at load, before any episode runs, never half-way through training.

Sources:

* a **folder suite**: ``<suite>/<task_id>/task.json`` plus ``<suite>/<task_id>/data/*``
  (``id`` defaults to the folder name; ``data/`` must exist -- a task about data with no
  data folder is almost always a copy that went wrong);
* a **JSONL** file: one task per line, ``data_dir`` relative to the file;
* a **BioMysteryBench** folder (``problems.csv`` or ``.parquet`` + ``data/<id>.zip``),
  read by `vera_env.tasks.biomystery`;
* ``"builtin"``: the procedurally generated families of `vera_env.tasks.builtin`;
* a list of `Task` objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from vera_env.errors import TaskFileError
from vera_env.tasks.model import GraderSpec, Task, Trap

__all__ = ["TaskSource", "UnknownTaskError", "load_folder", "load_jsonl", "load_tasks"]


class UnknownTaskError(KeyError):
    """A task id that the source does not have (a caller's mistake, not a broken file)."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0]) if self.args else "unknown task"


class TaskSource:
    """An ordered collection of tasks the env draws from.

    Tasks may be held ready or made on demand by a ``factory`` (builtin families regenerate
    any valid id, not only the listed ones).

    Args:
        tasks: Ready tasks, in order.
        name: Where the tasks came from, for error messages.
        ids: Ids listed in addition to ``tasks``, made by ``factory`` when first asked.
        factory: Makes a task from an id, or raises `UnknownTaskError`.
    """

    def __init__(self, tasks: Iterable[Task] = (), *, name: str = "tasks",
                 ids: Sequence[str] = (), factory: Callable[[str], Task] | None = None) -> None:
        self.name = name
        self._made: dict[str, Task] = {}
        for task in tasks:
            if not isinstance(task, Task):
                raise TypeError(f"expected Task objects, got {type(task).__name__}")
            if task.id in self._made:
                raise ValueError(f"duplicate task id {task.id!r} in {name}")
            self._made[task.id] = task
        self._ids = tuple(self._made) + tuple(i for i in ids if i not in self._made)
        if len(set(self._ids)) != len(self._ids):
            raise ValueError(f"duplicate task ids in {name}")
        if ids and factory is None:
            raise ValueError("ids listed without a factory to make them")
        self._factory = factory

    def ids(self) -> tuple[str, ...]:
        """The listed task ids, in order."""
        return self._ids

    def get(self, task_id: str) -> Task:
        """The task with this id.

        Raises:
            UnknownTaskError: The id is neither listed nor one the factory can make; the
                message shows a few ids that exist.
        """
        if task_id in self._made:
            return self._made[task_id]
        if self._factory is not None:
            try:
                task = self._factory(task_id)
            except UnknownTaskError as exc:
                raise UnknownTaskError(f"{exc} Known ids include: {self._preview()}") from None
            self._made[task_id] = task
            return task
        raise UnknownTaskError(f"no task {task_id!r} in {self.name} "
                               f"({len(self)} tasks); known ids include: {self._preview()}")

    def pick(self, rng: np.random.Generator) -> Task:
        """A listed task drawn uniformly with ``rng`` (reproducible for a seeded rng)."""
        if not self._ids:
            raise UnknownTaskError(f"{self.name} has no tasks to pick from")
        return self.get(self._ids[int(rng.integers(len(self._ids)))])

    def _preview(self, n: int = 5) -> str:
        shown = ", ".join(repr(i) for i in self._ids[:n])
        return shown + (", ..." if len(self._ids) > n else "")

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[Task]:
        return (self.get(task_id) for task_id in self._ids)

    def __repr__(self) -> str:
        return f"TaskSource({self.name!r}, {len(self)} tasks)"


def _field_name(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<task>"


_MODELS = {"": Task, "grader": GraderSpec, "trap": Trap}


def _describe(error: Any) -> str:
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        model = _MODELS.get(str(loc[0]) if len(loc) > 1 else "", Task)
        return f"unknown key; expected one of {sorted(model.model_fields)}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "missing":
        return "required field is missing"
    return message


def _build(data: Any, file: str, defaults: dict[str, Any], where: str = "") -> Task:
    """Validate one task mapping, translating every failure into a `TaskFileError`."""
    if not isinstance(data, dict):
        raise TaskFileError(file, "<task>", f"expected a JSON object, got {type(data).__name__}")
    try:
        return Task.model_validate({**defaults, **data})
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        fields = [_field_name(tuple(e["loc"])) for e in errors]
        also = "; ".join(f"{f}: {_describe(e)}"
                         for f, e in zip(fields[1:], errors[1:], strict=True))
        raise TaskFileError(file, fields[0], f"{_describe(errors[0])}{where}"
                            + (f"; also {also}" if also else "")) from None


def _parse_json(text: str, file: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(file, "json", f"invalid JSON at line {exc.lineno} column "
                                          f"{exc.colno}: {exc.msg}") from None


def load_folder(folder: str | Path) -> TaskSource:
    """Load a folder suite: ``<suite>/<task_id>/task.json`` + ``<suite>/<task_id>/data/``.

    Raises:
        TaskFileError: A task.json is unreadable, not JSON or not a valid task, a data
            folder is missing, two tasks share an id, or the suite has no tasks.
    """
    root = Path(folder)
    task_files = sorted(root.glob("*/task.json"))
    if not task_files:
        hint = (" (a BioMysteryBench suite needs problems.csv or problems.parquet)"
                if (root / "data").is_dir() else "")
        raise TaskFileError(str(root), "<suite>", f"no <task_id>/task.json found{hint}")
    tasks: list[Task] = []
    seen: dict[str, Path] = {}
    for file in task_files:
        data = _parse_json(file.read_text(encoding="utf-8"), str(file))
        if isinstance(data, dict) and "data_dir" in data:
            raise TaskFileError(str(file), "data_dir", "set by the folder layout "
                                "(<task_id>/data/); remove it from task.json")
        data_dir = file.parent / "data"
        if not data_dir.is_dir():
            raise TaskFileError(str(file), "data_dir", f"missing data folder {data_dir} "
                                "(create it, empty if the task needs no files)")
        task = _build(data, str(file), {"id": file.parent.name, "data_dir": data_dir})
        if task.id in seen:
            raise TaskFileError(str(file), "id", f"duplicate id {task.id!r} (also {seen[task.id]})")
        seen[task.id] = file
        tasks.append(task)
    return TaskSource(tasks, name=str(root))


def load_jsonl(path: str | Path) -> TaskSource:
    """Load one task per line of a JSONL file; ``data_dir`` is relative to the file.

    Blank lines are skipped. Errors name the file as ``<path>:<line>``.

    Raises:
        TaskFileError: A line is not JSON or not a valid task, two lines share an id, a
            ``data_dir`` does not exist, or the file has no tasks.
    """
    path = Path(path)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        data = _parse_json(line, where)
        if isinstance(data, dict) and isinstance(data.get("data_dir"), str):
            data = {**data, "data_dir": path.parent / data["data_dir"]}
        label = f" (task {data.get('id')!r})" if isinstance(data, dict) and "id" in data else ""
        task = _build(data, where, {}, label)
        if task.id in seen:
            raise TaskFileError(where, "id",
                                f"duplicate id {task.id!r} (also line {seen[task.id]})")
        seen[task.id] = lineno
        tasks.append(task)
    if not tasks:
        raise TaskFileError(str(path), "<file>", "no tasks in file")
    return TaskSource(tasks, name=str(path))


def load_tasks(source: str | Path | Sequence[Task] | TaskSource) -> TaskSource:
    """Turn any supported task source into a `TaskSource`.

    Args:
        source: ``"builtin"``, a folder suite, a ``.jsonl`` file, a BioMysteryBench suite
            (a folder with ``problems.csv``/``problems.parquet`` and ``data/``, or the
            problems file itself), a list of `Task`, or a `TaskSource` (returned as is).

    Returns:
        The tasks.

    Raises:
        TaskFileError: The path does not exist, is of an unknown kind, or holds a broken
            task.
        TypeError: ``source`` is none of the above.
    """
    if isinstance(source, TaskSource):
        return source
    if isinstance(source, str) and source == "builtin":
        from vera_env.tasks.builtin import builtin_source  # noqa: PLC0415 - heavy, on demand

        return builtin_source()
    if isinstance(source, str | Path):
        from vera_env.tasks.biomystery import find_problems, load_biomystery  # noqa: PLC0415

        path = Path(source)
        if find_problems(path) is not None:
            return load_biomystery(path)
        if path.is_dir():
            return load_folder(path)
        if path.is_file() and path.suffix == ".jsonl":
            return load_jsonl(path)
        why = "is not a task source" if path.exists() else "does not exist"
        raise TaskFileError(str(path), "<source>", f"{why}; expected 'builtin', a suite "
                                                   "folder, a .jsonl file or a "
                                                   "BioMysteryBench problems.csv/.parquet")
    if isinstance(source, Sequence):
        return TaskSource(source, name="task list")
    raise TypeError("tasks must be 'builtin', a path, or a list of Task; "
                    f"got {type(source).__name__}")
