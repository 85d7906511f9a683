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
* ``"real"``, ``"perturbed"``, ``"canary"``: real-data tasks, their messy variants and
  the unanswerable canaries (`vera_env.tasks.named`);
* ``"curriculum"``: builtin tasks served where pass rates are informative
  (`vera_env.tasks.curriculum`);
* a list of `Task` objects.

A task of a folder suite or a JSONL file may name its ``reference`` program
(``{"command": ...}`` or ``{"script": ...}``, the script beside ``task.json`` or the
JSONL file): how strength tells its controls from its mutants. A script that is not
there, or an empty command, is a ``TaskFileError`` at load, like any broken field;
`vera_env.tasks.unreferenced` says what a task without a reference pays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ValidationError

from vera_env.errors import TaskFileError
from vera_env.tasks.model import ReferenceProgram, Task, Trap
from vera_env.tasks.named import SOURCE_NAMES, named_source
from vera_env.tasks.source import TaskSource, UnknownTaskError
from vera_env.verification.grading import GraderSpec

__all__ = ["TaskSource", "UnknownTaskError", "load_folder", "load_jsonl", "load_tasks"]


def _field_name(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<task>"


_MODELS: dict[str, type[BaseModel]] = {"": Task, "grader": GraderSpec, "trap": Trap,
                                        "reference": ReferenceProgram}


def _keys(model: type[BaseModel]) -> list[str]:
    return sorted(f.alias or name for name, f in model.model_fields.items())


def _describe(error: Any) -> str:
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        model = _MODELS.get(str(loc[0]) if len(loc) > 1 else "", Task)
        return f"unknown key; expected one of {_keys(model)}"
    message: str = error["msg"].removeprefix("Value error, ")
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


def _anchor_reference(data: Any, base: Path) -> Any:
    """A ``reference``'s script and variant files relative to ``base`` (the task's
    folder, the JSONL's)."""
    if not (isinstance(data, dict) and isinstance(data.get("reference"), dict)):
        return data
    reference = dict(data["reference"])
    if isinstance(reference.get("script"), str):
        reference["script"] = base / reference["script"]
    for key in ("mutants", "controls"):
        if isinstance(reference.get(key), dict):
            reference[key] = {name: _anchored(entries, base)
                              for name, entries in reference[key].items()}
    return {**data, "reference": reference}


def _anchored(entries: Any, base: Path) -> Any:
    """Strings in a (nested) list as paths under ``base``; anything else as written (the
    model's validation names it)."""
    if isinstance(entries, str):
        return base / entries
    if isinstance(entries, list):
        return [_anchored(e, base) for e in entries]
    return entries


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
        task = _build(_anchor_reference(data, file.parent), str(file),
                      {"id": file.parent.name, "data_dir": data_dir})
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
        task = _build(_anchor_reference(data, path.parent), where, {}, label)
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
        source: ``"builtin"``, ``"real"``, ``"perturbed"``, ``"canary"``,
            ``"curriculum"``, a folder suite, a
            ``.jsonl`` file, a BioMysteryBench suite
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
    if isinstance(source, str) and source in SOURCE_NAMES:
        return named_source(source)
    if isinstance(source, (str, Path)):
        from vera_env.tasks.biomystery import find_problems, load_biomystery  # noqa: PLC0415

        path = Path(source)
        if find_problems(path) is not None:
            return load_biomystery(path)
        if path.is_dir():
            return load_folder(path)
        if path.is_file() and path.suffix == ".jsonl":
            return load_jsonl(path)
        why = "is not a task source" if path.exists() else "does not exist"
        raise TaskFileError(str(path), "<source>", f"{why}; expected a named source "
                                                   f"({', '.join(SOURCE_NAMES)}), a suite "
                                                   "folder, a .jsonl file or a "
                                                   "BioMysteryBench problems.csv/.parquet")
    if not isinstance(source, Sequence):
        raise TypeError("tasks must be 'builtin', a path, or a list of Task; "
                        f"got {type(source).__name__}")
    # (mypy 2.4 widens the narrowed type back to `str | Sequence[Task]` at the isinstance)
    return TaskSource(cast(Sequence[Task], source), name="task list")
