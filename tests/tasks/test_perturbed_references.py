"""The reference of a perturbed task: the base task's, reading through the mess.

``bom``, ``crlf`` and ``dup_header`` keep the base answer once the primary file is
cleaned; ``decoy`` and ``bloat`` add files the question never reads; ``truncated`` and
the canaries have no reference (their answer is "cannot be determined" whatever the
bytes). End to end on real bases (and builtin ones once their families carry a
reference), then the composition itself on small hand-made files.
"""

from __future__ import annotations

import functools
import random

import pytest
from declared_controls import declared_controls

from vera_env.tasks.builtin import make_task, task_id
from vera_env.tasks.canary import make_canary_task
from vera_env.tasks.model import Task
from vera_env.tasks.perturbed import base_task, kinds_for, make_perturbed_task, perturbed_reference
from vera_env.tasks.real import real_id
from vera_env.verification.grading.rules import grade_against
from vera_env.verification.strength.encoding import decode
from vera_env.verification.strength.reference import Reference
from vera_env.verification.strength.transforms import apply_control

BASES = (real_id("csv.penguin_mass"), real_id("vcf.het_sites"), real_id("fastq.read_count"),
         task_id("tab.sentinel_mean", "easy"), task_id("vcf.het_count", "easy"))


@functools.cache
def _primary(base_id: str) -> str:
    return base_task(base_id)[1]


CASES = [f"{b}+{k}" for b in BASES for k in kinds_for(_primary(b)) if k != "truncated"]
_BOM = b"\xef\xbb\xbf"


@functools.cache
def _staged(tid: str) -> tuple[Task, dict[str, bytes]]:
    base_id = tid.rpartition("+")[0]
    if base_task(base_id)[0].reference is None:
        pytest.skip(f"{base_id} has no reference yet (its family declares none)")
    task = make_perturbed_task(tid)
    files = {name: decode(path.read_bytes(), max_bytes=1 << 30, budget_s=60).content
             for name, path in task.data_files().items()}
    return task, files


def _same(task: Task, answer: str) -> bool:
    return grade_against(task.grader, task.answer, answer).correct is True


@pytest.mark.parametrize("tid", CASES)
def test_perturbed_solve_on_staged_files_gives_the_base_answer(tid: str) -> None:
    task, files = _staged(tid)
    assert task.reference is not None
    assert _same(task, task.reference.solve(files))


@pytest.mark.parametrize("tid", CASES)
def test_perturbed_declared_controls_keep_the_answer(tid: str) -> None:
    task, files = _staged(tid)
    ref = task.reference
    for name, transform, varied in declared_controls(ref, files):
        assert _same(task, ref.solve(varied)), (name, transform)


@pytest.mark.parametrize("tid", CASES)
def test_perturbed_mutators_keep_the_mess_and_move_the_answer(tid: str) -> None:
    task, files = _staged(tid)
    primary, kind = _primary(tid.rpartition("+")[0]), tid.rpartition("+")[2]
    content = files[primary]
    moved = 0
    for mutate in task.reference.mutators.get(primary, ()):
        for draw in range(2):
            changed = mutate(content, random.Random(draw))
            if changed is None:
                continue
            moved += not _same(task, task.reference.solve({**files, primary: changed}))
            if kind == "bom":
                assert changed.startswith(_BOM)
            if kind == "crlf":
                assert b"\r\n" in changed
    if tid.startswith("real."):  # the real types' mutators are aimed: they move it
        assert moved > 0


@pytest.mark.parametrize("tid", [real_id("vcf.het_sites") + "+decoy",
                                 real_id("csv.penguin_mass") + "+bloat"])
def test_added_files_are_wholly_irrelevant(tid: str) -> None:
    task, files = _staged(tid)
    extra = next(n for n in files if n.startswith("old/") or n == "README.md")
    ref = task.reference
    assert "drop_irrelevant" in ref.controls_for(extra)
    assert _same(task, ref.solve({**files, extra: b"anything at all\n"}))
    assert _same(task, ref.solve({n: c for n, c in files.items() if n != extra}))


def test_truncated_and_canaries_have_no_reference() -> None:
    assert make_perturbed_task(real_id("vcf.het_sites") + "+truncated").reference is None
    assert make_canary_task(real_id("csv.penguin_mass") + "+absent").reference is None


def test_builtin_perturbation_carries_the_base_reference_or_none() -> None:
    base = make_task(task_id("tab.sentinel_mean", "easy"))
    task = make_perturbed_task(base.id + "+crlf")
    assert (task.reference is None) == (base.reference is None)


# ----- the composition, on hand-made files -----

_TABLE = b"group\tvalue\nx\t1\ny\t2\nx\t3\ny\t4\nx\t5\n"


def _sum_x(contents: dict[str, bytes]) -> str:
    lines = contents["t.tsv"].decode().splitlines()
    if lines[0] != "group\tvalue":
        raise ValueError("no header")
    return str(sum(int(v) for g, v in (x.split("\t") for x in lines[1:]) if g == "x"))


_BASE = Reference(solve=_sum_x, preserving={"t.tsv": ("shuffle_records", "drop_irrelevant")},
                  irrelevant={"t.tsv": lambda record: not record.startswith(b"x\t")},
                  mutators={"t.tsv": (lambda c, rng: c.replace(b"x\t1\n", b"x\t7\n"),
                                      lambda c, rng: _TABLE.replace(b"x\t1", b"x\t8"))})


def _perturbed(kind: str) -> Reference:
    ref = perturbed_reference(_BASE, kind, "t.tsv", frozenset({"t.tsv"}), ("README.md",),
                              b"group\tvalue")
    assert ref is not None
    return ref


def test_dup_header_survives_shuffles_that_move_the_copy_anywhere() -> None:
    ref = _perturbed("dup_header")
    messy = b"group\tvalue\nx\t1\ny\t2\ngroup\tvalue\nx\t3\ny\t4\nx\t5\n"
    assert ref.solve({"t.tsv": messy, "README.md": b"# notes\n"}) == "9"
    for draw in range(5):
        moved = apply_control("shuffle_records", "t.tsv", messy, random.Random(draw))
        assert ref.solve({"t.tsv": moved}) == "9"
    # The base predicate calls the header copy irrelevant; the composed one keeps it.
    assert _BASE.irrelevant["t.tsv"](b"group\tvalue\n")
    assert not ref.irrelevant["t.tsv"](b"group\tvalue\n")


def test_crlf_and_bom_records_are_cleaned_before_the_base_predicate() -> None:
    assert not _perturbed("crlf").irrelevant["t.tsv"](b"x\t1\r\n")
    assert _perturbed("crlf").irrelevant["t.tsv"](b"y\t2\r\n")
    assert _perturbed("bom").solve({"t.tsv": _BOM + _TABLE}) == "9"


def test_a_mutant_that_loses_the_mess_is_refused() -> None:
    ref = _perturbed("bom")
    keeps, cleans = ref.mutators["t.tsv"]
    assert keeps(_BOM + _TABLE, random.Random(0)) == _BOM + _TABLE.replace(b"x\t1\n", b"x\t7\n")
    # A mutant without the BOM would let a BOM detector pass for a discriminating check.
    assert cleans(_BOM + _TABLE, random.Random(0)) is None


def test_bom_drops_record_controls_where_it_hides_a_meta_header() -> None:
    base = Reference(solve=lambda c: "1", preserving={
        "c.vcf.gz": ("recompress", "shuffle_records", "add_comment", "drop_irrelevant")},
        irrelevant={"c.vcf.gz": lambda record: False})
    ref = perturbed_reference(base, "bom", "c.vcf.gz", frozenset({"c.vcf.gz"}))
    assert ref is not None and ref.controls_for("c.vcf.gz") == ("recompress",)
    crlf = perturbed_reference(base, "crlf", "c.vcf.gz", frozenset({"c.vcf.gz"}))
    assert crlf is not None and crlf.controls_for("c.vcf.gz") == base.controls_for("c.vcf.gz")


def test_no_reference_without_a_base_one_or_when_truncated() -> None:
    assert perturbed_reference(None, "bom", "t.tsv", frozenset({"t.tsv"})) is None
    assert perturbed_reference(_BASE, "truncated", "t.tsv", frozenset({"t.tsv"})) is None


def test_base_solver_sees_only_the_base_files() -> None:
    seen: list[set[str]] = []

    def solve(contents: dict[str, bytes]) -> str:
        seen.append(set(contents))
        return "1"

    ref = perturbed_reference(Reference(solve=solve), "decoy", "t.tsv", frozenset({"t.tsv"}),
                              ("old/t.tsv",))
    assert ref is not None
    ref.solve({"t.tsv": _TABLE, "old/t.tsv": _TABLE})
    assert seen == [{"t.tsv"}]
    assert ref.irrelevant["old/t.tsv"](b"x\t1\n")


def test_base_controls_are_carried_and_keep_the_mess() -> None:
    """A family's own controls (``Reference.controls``) vary the perturbed task's files
    too; on a cleaned kind they must keep the mess, like the mutators."""
    def reword(content: bytes, rng: random.Random) -> bytes | None:
        return content.replace(b"y\t2\n", b"y\t20\n")

    base = Reference(solve=_sum_x, controls={"t.tsv": (reword, lambda c, rng: _TABLE)})
    bloat = perturbed_reference(base, "bloat", "t.tsv", frozenset({"t.tsv"}), ("README.md",))
    assert bloat is not None and bloat.controls["t.tsv"] == base.controls["t.tsv"]
    bom = perturbed_reference(base, "bom", "t.tsv", frozenset({"t.tsv"}))
    assert bom is not None
    keeps, cleans = bom.controls["t.tsv"]
    assert keeps(_BOM + _TABLE, random.Random(0)) == _BOM + _TABLE.replace(b"y\t2\n", b"y\t20\n")
    assert cleans(_BOM + _TABLE, random.Random(0)) is None


@pytest.mark.parametrize("tid", [t for t in CASES if t.endswith(("+bom", "+crlf", "+dup_header"))])
def test_perturbed_own_controls_keep_the_answer_and_the_mess(tid: str) -> None:
    task, files = _staged(tid)
    primary, kind = _primary(tid.rpartition("+")[0]), tid.rpartition("+")[2]
    for control in task.reference.controls.get(primary, ()):
        changed = control(files[primary], random.Random(0))
        if changed is None:
            continue
        assert changed != files[primary] and _same(task, task.reference.solve(
            {**files, primary: changed}))
        if kind == "bom":
            assert changed.startswith(_BOM)


def test_a_bom_before_a_meta_header_gets_the_record_controls_back_under_it() -> None:
    """Withdrawn, the VCF's record controls left only a recompression: no control varied
    the content, so no check through the file could earn. Re-applied under the BOM they
    vary it, and keep the BOM."""
    tid = real_id("vcf.het_sites") + "+bom"
    task, files = _staged(tid)
    assert task.reference.controls_for("chr22.vcf.gz") == ("recompress",)
    edits = task.reference.controls["chr22.vcf.gz"]
    assert len(edits) == 4  # the family's re-scoring, shuffle_records, add_comment, drop_irrelevant
    varied = [edit(files["chr22.vcf.gz"], random.Random(1)) for edit in edits]
    assert all(v is not None and v.startswith(_BOM) and v != files["chr22.vcf.gz"] for v in varied)
