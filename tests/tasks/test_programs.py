"""Exported reference programs: each script, run in the sandbox, gives its family's Python
solver's answer on the task's files and on every variant strength builds of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vera_env.sandbox import make_sandbox
from vera_env.tasks.builtin import TASK_TYPES, make_task
from vera_env.tasks.model import ReferenceProgram
from vera_env.tasks.programs import SCRIPTED_FAMILIES, reference_script
from vera_env.verification.grading import grade_against
from vera_env.verification.strength.encoding import decode
from vera_env.verification.strength.variants import Settings, census, decoded_contents

_ALL = 1 << 30


def test_exactly_the_scripted_families_get_a_script() -> None:
    scripted = {t for t in TASK_TYPES if reference_script(make_task(f"{t}.easy.s0"))}
    assert scripted == set(SCRIPTED_FAMILIES)


@pytest.mark.parametrize("task_id", [f"{t}.{d}.s1" for t in SCRIPTED_FAMILIES
                                     for d in ("easy", "medium")])
def test_script_agrees_with_the_solver_on_every_variant(task_id: str, tmp_path: Path) -> None:
    task = make_task(task_id)
    script = reference_script(task)
    assert script is not None and task.reference is not None
    (tmp_path / "reference.py").write_text(script)
    program = ReferenceProgram(script=tmp_path / "reference.py")
    exported = task.model_copy(update={"reference_program": program}).with_reference(None)
    files = census(task.data_files(), Settings(4, 4, 0, _ALL), reference=task.reference,
                   same=lambda a, b: grade_against(task.grader, a, b).correct is True)
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
