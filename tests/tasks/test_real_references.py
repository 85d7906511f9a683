"""Every real type's `Reference`: its solver recomputes the answer from the decoded staged
files, each declared control transform keeps that answer, each aimed mutator moves it,
and a file the solver cannot read raises ValueError (strength then sets the variant
aside instead of calling it a control or a mutant).

The files are read the way strength reads them: staged on disk by ``make_real_task``,
then decoded by ``strength.encoding.decode`` (gzip and BGZF undone, HDF5 as it is).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable

import pytest
from declared_controls import declared_controls

from vera_env.tasks.model import Task
from vera_env.tasks.real import REAL_TYPES, make_real_task, real_id, real_instance
from vera_env.verification.grading.rules import grade_against
from vera_env.verification.strength.encoding import decode
from vera_env.verification.strength.transforms import split_records

CASES = [(t, s) for t in REAL_TYPES for s in (0, 1)]
_IDS = [f"{t}.s{s}" for t, s in CASES]
BINARY = {"bam.duplicates", "h5ad.detected_cells"}  # no record-level control applies


@functools.cache
def _staged(task_type: str, seed: int) -> tuple[Task, dict[str, bytes]]:
    task = make_real_task(real_id(task_type, seed))
    files = {name: decode(path.read_bytes(), max_bytes=1 << 30, budget_s=60).content
             for name, path in task.data_files().items()}
    return task, files


def _primary(task_type: str, seed: int) -> str:
    return real_instance(real_id(task_type, seed)).primary


def _same(task: Task, answer: str) -> bool:
    return grade_against(task.grader, task.answer, answer).correct is True


@pytest.mark.parametrize("task_type, seed", CASES, ids=_IDS)
def test_solve_on_staged_files_gives_the_task_answer(task_type: str, seed: int) -> None:
    task, files = _staged(task_type, seed)
    assert task.reference is not None
    got = task.reference.solve(files)
    assert got == task.answer  # the same format, decimals included
    assert _same(task, got)


@pytest.mark.parametrize("task_type, seed", CASES, ids=_IDS)
def test_declared_controls_keep_the_answer(task_type: str, seed: int) -> None:
    task, files = _staged(task_type, seed)
    ref = task.reference
    built = 0
    for name, transform, varied in declared_controls(ref, files):
        built += 1
        assert _same(task, ref.solve(varied)), (name, transform)
    assert built > 0 or task_type in BINARY


@pytest.mark.parametrize("task_type, seed", CASES, ids=_IDS)
def test_dropping_every_irrelevant_record_keeps_the_answer(task_type: str, seed: int) -> None:
    # Stronger than the control (a tenth of them): the predicate never marks a record
    # the question reads, nor the header.
    task, files = _staged(task_type, seed)
    ref = task.reference
    for name, unread in ref.irrelevant.items():
        header, records = split_records(name, files[name])
        kept = [r for r in records if not unread(r)]
        if name == _primary(task_type, seed):  # some records are read, some are not
            assert 0 < len(kept) < len(records)
        assert _same(task, ref.solve({**files, name: header + b"".join(kept)})), name


@pytest.mark.parametrize("task_type, seed", CASES, ids=_IDS)
def test_every_aimed_mutator_moves_the_answer(task_type: str, seed: int) -> None:
    task, files = _staged(task_type, seed)
    ref = task.reference
    assert ref.mutators, "every real type aims at least one mutator"
    for name, mutators in ref.mutators.items():
        for i, mutate in enumerate(mutators):
            moved = 0
            for draw in range(3):
                changed = mutate(files[name], random.Random(draw))
                assert changed is not None and changed != files[name], (name, i)
                moved += not _same(task, ref.solve({**files, name: changed}))
            assert moved >= 2, f"{name} mutator {i} moved the answer {moved} of 3 times"


def _drop_first_line(content: bytes) -> bytes:
    return content.split(b"\n", 1)[1]


def _drop_line_starting(prefix: bytes) -> Callable[[bytes], bytes]:
    return lambda c: b"".join(x for x in c.splitlines(keepends=True) if not x.startswith(prefix))


BROKEN: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "csv.penguin_mass": (_drop_first_line, "not the penguins table"),
    "csv.cancer_mean": (_drop_first_line, "names no class"),
    "csv.lung_median": (_drop_first_line, "not the lung table"),
    "fasta.site_count": (_drop_first_line, "not FASTA"),
    "gtf.exonic_bp": (lambda c: c + b"1\thavana\texon\n", "3 columns"),
    "gff.exon_count": (lambda c: c.replace(b"Parent=", b"Parnt="), "without Parent"),
    "bam.duplicates": (lambda c: c[:len(c) // 2], "does not fit|malformed BAM"),
    "fastq.read_count": (lambda c: b"".join(c.splitlines(keepends=True)[:-2]),
                         "not a whole number of records"),
    "h5ad.detected_cells": (lambda c: c[:len(c) // 2], "truncated file"),
    "vcf.het_sites": (_drop_line_starting(b"#CHROM"), "without a #CHROM"),
}


@pytest.mark.parametrize("task_type", list(REAL_TYPES))
def test_solve_raises_value_error_on_a_file_it_cannot_read(task_type: str) -> None:
    task, files = _staged(task_type, 0)
    primary = _primary(task_type, 0)
    breaking, message = BROKEN[task_type]
    with pytest.raises(ValueError, match=message):
        task.reference.solve({**files, primary: breaking(files[primary])})
    with pytest.raises(ValueError):
        task.reference.solve({**files, primary: b"\x89garbage\xff\xfe\x00" * 40})
    with pytest.raises(ValueError, match="not among the task's files"):
        task.reference.solve({})


def test_answer_undefined_by_a_variant_is_cannot_be_determined_not_a_crash() -> None:
    # Every Gentoo bird unweighed: no mean, so the variant's answer differs (a mutant).
    task, files = _staged("csv.penguin_mass", 1)
    assert "Gentoo" in task.question
    rows = files["penguins.csv"].decode().splitlines(keepends=True)
    na = [r if not r.startswith("Gentoo,") else ",".join(
        v if i != 5 else "NA" for i, v in enumerate(r.split(","))) for r in rows]
    got = task.reference.solve({"penguins.csv": "".join(na).encode()})
    assert got == "cannot be determined" and not _same(task, got)


def test_bam_declares_only_recompress_and_h5ad_nothing() -> None:
    bam, _ = _staged("bam.duplicates", 0)
    h5ad, _ = _staged("h5ad.detected_cells", 0)
    assert bam.reference.controls_for("control.bam") == ("recompress",)
    assert h5ad.reference.controls_for("pbmc68k_reduced.h5ad") == ()


@pytest.mark.parametrize("task_type, seed", [(t, s) for t in sorted(BINARY) for s in (0, 1)])
def test_binary_types_own_controls_change_the_content_and_keep_the_answer(
        task_type: str, seed: int) -> None:
    """No generic transform varies a BAM's or an h5ad's content, and strength grants no
    kill through a file whose controls only re-encode it (a fingerprint would pass
    them): the types bring controls of their own, each a real edit of the content."""
    task, files = _staged(task_type, seed)
    name = _primary(task_type, seed)
    edits = task.reference.controls[name]
    assert len(edits) >= 2
    for edit in edits:
        for draw in range(2):
            changed = edit(files[name], random.Random(draw))
            assert changed is not None and changed != files[name], (edit.__name__, draw)
            assert _same(task, task.reference.solve({**files, name: changed})), edit.__name__


def test_fastq_files_not_asked_about_are_wholly_irrelevant() -> None:
    task, files = _staged("fastq.read_count", 0)
    asked = _primary("fastq.read_count", 0)
    others = sorted(set(files) - {asked})
    assert len(others) == 3 and set(task.reference.irrelevant) == set(others)
    assert "drop_irrelevant" not in task.reference.controls_for(asked)
