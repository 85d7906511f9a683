"""Writing any task source as a folder suite (``<dir>/<task_id>/task.json`` + ``data/``).

Why export. A folder suite is the one format every tool reads and a person can open: a
builtin instance exported is a fixed, reviewable benchmark that no longer depends on this
package's generator (or numpy's), and a BioMysteryBench suite exported has its archives
unpacked once, for good. Exporting and loading back must give the same tasks, so only
what `Task` declares is written, in the same field names, and a field left at its
default is left out. Real-data tasks carry other people's data under their licences
(CC-BY, LGPL, Artistic, ...): a suite that holds any gets a ``SOURCES.md`` naming each
package, its licence and origin, and the tasks built from it, so the attribution
travels with the files.

A task's reference travels too, as a ``reference`` program (``vera_env.tasks.programs``
says why a script and which families have one): a task read from a suite keeps its
command or gets a copy of its script, and a builtin or real task whose family has a
script gets ``reference.py`` (nine of the ten real types: not h5ad's). Without it the
exported suite would pay its checks nothing (`vera_env.tasks.unreferenced`). The family's
aimed mutants and controls travel as files its ``reference`` declares
(`vera_env.tasks.declared_variants`): without them three real types (a binary BAM, a
FASTQ whose line edits break records, a GFF whose asked exons a tenth of 50,000 lines
seldom touches) got no mutant at all, and were exported without a reference.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vera_env.tasks.declared_variants import (
    Drawn,
    copy_declared,
    declared_names,
    draw_family_variants,
    write_drawn,
)
from vera_env.tasks.model import Task
from vera_env.tasks.programs import reference_script

if TYPE_CHECKING:
    from vera_env.tasks.real.sources import Source

__all__ = ["task_json", "write_suite"]

_SCRIPT = "reference.py"


def task_json(task: Task) -> dict[str, object]:
    """The ``task.json`` body of a task (everything but ``data_dir``, defaults left out;
    a reference script by its file name, the file written beside ``task.json``)."""
    body = task.model_dump(mode="json", exclude={"data_dir", "reference_program"},
                           exclude_defaults=True)
    body["grader"] = task.grader.model_dump(mode="json", exclude_none=True)
    program = task.reference_program
    reference: dict[str, object] = {}
    if program is not None:
        reference = ({"command": program.command} if program.command is not None
                     else {"script": program.script.name if program.script else ""})
        if program.rewrites is not None:
            reference["rewrites"] = {k: list(v) for k, v in program.rewrites.items()}
        reference.update(_declared(program.mutants or {}, program.controls or {}))
    elif reference_script(task) is not None:
        reference = {"script": _SCRIPT}
        # The family's own narrowing of the rewrites travels with its script: a rewrite
        # that keeps the answer but moves a fact the reference checks on its way (a
        # survival table's time and status pairs) would cost the exported task checks.
        if task.reference is not None and task.reference.rewriting:
            reference["rewrites"] = {k: list(v) for k, v in task.reference.rewriting.items()}
        drawn = _drawn(task)
        reference.update(_declared(drawn.mutants, drawn.controls))
    if reference:
        body["reference"] = reference
    return {"id": task.id, **{k: v for k, v in body.items() if k != "id"}}


def _declared(mutants: Mapping[str, tuple[tuple[Any, ...], ...]],
              controls: Mapping[str, tuple[Any, ...]]) -> dict[str, object]:
    """``reference.mutants`` / ``reference.controls`` of ``task.json``, where any."""
    mutant_names, control_names = declared_names(mutants, controls)
    return {**({"mutants": mutant_names} if mutant_names else {}),
            **({"controls": control_names} if control_names else {})}


_LAST_DRAWN: dict[tuple[str, str], Drawn] = {}


def _drawn(task: Task) -> Drawn:
    """The family's variants of ``task``, drawn once for the task being written
    (``write_suite`` writes its files, then ``task_json`` names them). Only the last
    task's are kept: a real task's draws are whole copies of files of tens of MB, and
    a suite of them must not pile up in memory."""
    key = (task.id, str(task.data_dir))
    if key not in _LAST_DRAWN:
        _LAST_DRAWN.clear()
        _LAST_DRAWN[key] = draw_family_variants(task)
    return _LAST_DRAWN[key]


def write_suite(tasks: Iterable[Task], folder: str | Path) -> list[Path]:
    """Write tasks as a folder suite that `vera_env.tasks.load_folder` reads back.

    Args:
        tasks: The tasks (data files are copied, never linked: the suite must outlive
            the cache it came from).
        folder: The suite folder; created if missing.

    Returns:
        The task folders written, in order.

    Raises:
        FileExistsError: A task's folder already exists (nothing is overwritten).
    """
    root = Path(folder)
    written: list[Path] = []
    for task in tasks:
        target = root / task.id
        if target.exists():
            raise FileExistsError(f"{target} exists; export into an empty folder")
        (target / "data").mkdir(parents=True)
        for name, source in task.data_files().items():
            dest = target / "data" / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
        _write_reference(task, target)
        (target / "task.json").write_text(json.dumps(task_json(task), indent=2,
                                                     ensure_ascii=False) + "\n",
                                          encoding="utf-8")
        written.append(target)
    _write_sources(root, [folder.name for folder in written])
    return written


def _write_reference(task: Task, target: Path) -> None:
    """The task's reference script beside its ``task.json``, if it has one, and the
    files of its declared variants (`vera_env.tasks.declared_variants`)."""
    program = task.reference_program
    if program is not None:
        if program.script is not None:
            shutil.copyfile(program.script, target / program.script.name)
        copy_declared(program.mutants or {}, program.controls or {}, target)
    elif (script := reference_script(task)) is not None:
        (target / _SCRIPT).write_text(script, encoding="utf-8")
        write_drawn(_drawn(task), target)


def _write_sources(root: Path, task_ids: list[str]) -> None:
    """``SOURCES.md``: the registry packages the real-data tasks among ``task_ids`` use."""
    from vera_env.tasks.real import data_source  # noqa: PLC0415 (numpy and the sources, only here)

    used: dict[str, tuple[Source, list[str]]] = {}
    for tid in task_ids:
        src = data_source(tid)
        if src is not None:
            used.setdefault(f"{src.registry}:{src.package}", (src, []))[1].append(tid)
    if not used:
        return
    lines = ["# Data sources", "",
             "The data files of these tasks come from registry packages, under their licences:",
             "",
             "| package | licence | origin | tasks |", "|---|---|---|---|"]
    for src, ids in used.values():
        lines.append(f"| {src.registry}: {src.package} {src.version} | {src.licence} | "
                     f"{src.origin} | {', '.join(ids)} |")
    (root / "SOURCES.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
