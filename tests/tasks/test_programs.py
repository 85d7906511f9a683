"""Exported reference programs: each script, run in the sandbox, gives its family's Python
solver's answer on the task's files and on every variant strength builds of them, for
the builtin families and the real-data types alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vera_env.sandbox import make_sandbox
from vera_env.tasks.builtin import TASK_TYPES, make_task
from vera_env.tasks.model import ReferenceProgram, Task
from vera_env.tasks.programs import SCRIPTED_FAMILIES, SCRIPTED_REAL_TYPES, reference_script
from vera_env.tasks.real import REAL_TYPES, make_real_task, real_id
from vera_env.verification.grading import grade_against
from vera_env.verification.strength.encoding import decode
from vera_env.verification.strength.task import StrengthTask
from vera_env.verification.strength.variants import Settings, census, decoded_contents

_ALL = 1 << 30


def test_exactly_the_scripted_families_get_a_script() -> None:
    scripted = {t for t in TASK_TYPES if reference_script(make_task(f"{t}.easy.s0"))}
    assert scripted == set(SCRIPTED_FAMILIES)


def test_exactly_the_scripted_real_types_get_a_script() -> None:
    scripted = {t for t in REAL_TYPES if reference_script(make_real_task(real_id(t)))}
    assert scripted == set(SCRIPTED_REAL_TYPES)
    assert set(REAL_TYPES) - scripted == {"h5ad.detected_cells"}  # HDF5: h5py, not stdlib


def _exported(task: Task, folder: Path) -> Task:
    """``task`` as an exported suite reads it: no Python solver, its script as reference."""
    script = reference_script(task)
    assert script is not None
    (folder / "reference.py").write_text(script)
    program = ReferenceProgram(script=folder / "reference.py")
    return task.model_copy(update={"reference_program": program}).with_reference(None)


def _assert_script_agrees(task: Task, folder: Path, settings: Settings) -> None:
    """The exported script prints the solver's answer on the task's files and on every
    control and mutant strength classifies with the solver."""
    assert task.reference is not None
    exported = _exported(task, folder)
    files = census(StrengthTask(task.data_files(), task.reference,
                                 lambda a, b: grade_against(task.grader, a, b).correct is True), settings)
    base = decoded_contents(task.data_files(), _ALL, 30.0)
    variants = [{**base, f.name: decode(blob.data, max_bytes=_ALL, budget_s=30.0).content}
                for f in files for blob in (*f.controls, *f.mutants)]
    assert len(variants) >= 4
    with make_sandbox("auto") as box:
        reference = exported.strength_reference(box)
        assert reference is not None
        assert reference.solve(base) == task.answer
        for contents in variants:
            assert reference.solve(contents) == task.reference.solve(contents)


@pytest.mark.parametrize("task_id", [f"{t}.{d}.s1" for t in SCRIPTED_FAMILIES
                                     for d in ("easy", "medium")])
def test_script_agrees_with_the_solver_on_every_variant(task_id: str, tmp_path: Path) -> None:
    _assert_script_agrees(make_task(task_id), tmp_path, Settings(4, 4, 0, _ALL))


@pytest.mark.parametrize("task_type", SCRIPTED_REAL_TYPES)
def test_real_script_agrees_with_the_solver_on_every_variant(task_type: str,
                                                             tmp_path: Path) -> None:
    _assert_script_agrees(make_real_task(real_id(task_type, 1)), tmp_path,
                          Settings(3, 3, 0, _ALL))


def test_script_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    """A variant the solver cannot read is no control and no mutant: the script exits
    non-zero there instead of printing a number."""
    task = make_task("vcf.het_count.easy.s0")
    (tmp_path / "reference.py").write_text(reference_script(task) or "")
    (tmp_path / "data").mkdir()
    shutil.copyfile(task.data_files()["calls.vcf.gz"], tmp_path / "data" / "calls.vcf.gz")
    exported = task.model_copy(update={
        "data_dir": tmp_path / "data",
        "reference_program": ReferenceProgram(script=tmp_path / "reference.py")}
    ).with_reference(None)
    with make_sandbox("auto") as box:
        reference = exported.strength_reference(box)
        assert reference is not None
        with pytest.raises(ValueError, match="not VCF"):
            reference.solve({"calls.vcf.gz": b"chr1\t5\t.\tA\tG\n"})


@pytest.mark.parametrize(("task_type", "name", "content", "error"), [
    ("fastq.read_count", None, b"@r1\nACGT\n+\nIIII\n@r2\nAC\n", "not a whole number"),
    ("bam.duplicates", "control.bam", b"BAM\x01\x00\x00\x00\x00\x01\x00", "exit 1"),
    ("csv.lung_median", "lung.csv", b"inst,time,status\n3,306,2\n", "KeyError"),
])
def test_real_script_refuses_what_its_solver_refuses(task_type: str, name: str | None,
                                                     content: bytes, error: str,
                                                     tmp_path: Path) -> None:
    """Content the solver raises on (a cut FASTQ record, a cut BAM header, a table
    without the group column) makes the script exit non-zero, not print a number."""
    task = make_real_task(real_id(task_type))
    assert task.reference is not None
    name = name or next(n for n in task.data_files() if n in task.question)
    base = decoded_contents(task.data_files(), _ALL, 30.0)
    with pytest.raises(ValueError):
        task.reference.solve({**base, name: content})
    with make_sandbox("auto") as box:
        reference = _exported(task, tmp_path).strength_reference(box)
        assert reference is not None
        with pytest.raises(ValueError, match=error):
            reference.solve({**base, name: content})
