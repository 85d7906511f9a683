"""Every builtin type's `Reference`: its solver recomputes the answer from the decoded
written files, each declared control transform keeps that answer, each aimed mutator
moves it, and a file the solver cannot read raises ValueError (strength then sets the
variant aside instead of calling it a control or a mutant).

The files are the generator's bytes (what ``make_task`` writes), decoded the way strength
decodes them (``strength.encoding.decode``).
"""

from __future__ import annotations

import functools
import random

import pytest
from declared_controls import declared_controls

from vera_env.tasks.builtin import TASK_TYPES, generate, make_task, task_id
from vera_env.tasks.builtin.instance import Instance
from vera_env.tasks.builtin.solvers import fasta_records, moved, read_mtx, read_table, vcf_table
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.grading import GraderSpec
from vera_env.verification.grading.rules import grade_against
from vera_env.verification.strength.encoding import decode
from vera_env.verification.strength.reference import Reference
from vera_env.verification.strength.transforms import file_format, split_records

IDS = [task_id(t, d, s) for t in TASK_TYPES for d in ("easy", "medium") for s in (0, 1, 2)]
_INDEXED = ("genes.tsv.gz", "features.tsv.gz", "barcodes.tsv.gz")  # matrix index = line number


@functools.cache
def _built(tid: str) -> tuple[Instance, GraderSpec, dict[str, bytes]]:
    instance = generate(tid)
    files = {name: decode(raw, max_bytes=1 << 30, budget_s=60).content
             for name, raw in instance.files.items()}
    return instance, GraderSpec.model_validate(instance.grader), files


def _reference(instance: Instance) -> Reference:
    assert instance.reference is not None
    return instance.reference


def _same(tid: str, answer: str) -> bool:
    instance, grader, _ = _built(tid)
    return grade_against(grader, instance.answer, answer).correct is True


@pytest.mark.parametrize("task_type", list(TASK_TYPES))
def test_make_task_attaches_a_reference_that_solves_the_files_on_disk(task_type: str) -> None:
    task = make_task(task_id(task_type, "easy", 0))
    assert task.reference is not None
    files = {name: decode(path.read_bytes(), max_bytes=1 << 30, budget_s=60).content
             for name, path in task.data_files().items()}
    assert task.reference.solve(files) == task.answer


@pytest.mark.parametrize("tid", IDS)
def test_solve_on_written_files_gives_the_task_answer(tid: str) -> None:
    instance, _, files = _built(tid)
    got = _reference(instance).solve(files)
    assert got == instance.answer  # the answer's own format, decimals included
    assert _same(tid, got)


@pytest.mark.parametrize("tid", IDS)
def test_declared_controls_keep_the_answer(tid: str) -> None:
    instance, _, files = _built(tid)
    ref = _reference(instance)
    built = 0
    for name, transform, varied in declared_controls(ref, files):
        built += 1
        assert _same(tid, ref.solve(varied)), (name, transform)
    assert built >= 2


@pytest.mark.parametrize("tid", IDS)
def test_dropping_every_irrelevant_record_keeps_the_answer(tid: str) -> None:
    # Stronger than the control (a tenth of them): the predicate never marks a record
    # the question reads.
    instance, _, files = _built(tid)
    ref = _reference(instance)
    for name, unread in ref.irrelevant.items():
        split = split_records(name, files[name])
        assert split is not None
        header, records = split
        kept = [r for r in records if not unread(r)]
        assert kept, name
        assert _same(tid, ref.solve({**files, name: header + b"".join(kept)})), name


@pytest.mark.parametrize("tid", IDS)
def test_every_aimed_mutator_moves_the_answer(tid: str) -> None:
    instance, _, files = _built(tid)
    ref = _reference(instance)
    assert ref.mutators, "every builtin type aims a mutator at its primary file"
    assert next(iter(files)) in ref.mutators
    for name, mutators in ref.mutators.items():
        for i, mutate in enumerate(mutators):
            made = 0
            for draw in range(2):
                changed = mutate(files[name], random.Random(draw))
                if changed is None:
                    continue
                made += 1
                assert changed != files[name]
                assert not _same(tid, ref.solve({**files, name: changed})), (name, i, draw)
            assert made, f"{name} mutator {i} made no mutant"


@pytest.mark.parametrize("task_type", list(TASK_TYPES))
def test_declarations_use_every_control_the_format_allows(task_type: str) -> None:
    instance, _, files = _built(task_id(task_type, "easy", 0))
    ref = _reference(instance)
    for name in files:
        declared = set(ref.controls_for(name))
        fmt = file_format(name)
        assert ("recompress" in declared) == name.endswith(".gz"), name
        assert ("add_comment" in declared) == (fmt in ("vcf", "mtx")), name
        assert ("rewrap" in declared) == (fmt == "fasta"), name
        if name in _INDEXED:
            assert not declared & {"shuffle_records", "drop_irrelevant"}, name
        if fmt == "mtx":
            assert "drop_irrelevant" not in declared  # the size line counts the entries


def _drop_first_line(content: bytes) -> bytes:
    return content.split(b"\n", 1)[1]


def _headless(name: str, content: bytes) -> bytes:
    if file_format(name) == "vcf":
        return b"".join(line for line in content.splitlines(keepends=True)
                        if not line.startswith(b"#"))
    return _drop_first_line(content)  # the FASTA title, the MatrixMarket banner, a table header


_HEADED = ("cells.tsv", "samples.tsv")


@pytest.mark.parametrize("task_type", list(TASK_TYPES))
def test_solve_raises_value_error_on_a_file_it_cannot_read(task_type: str) -> None:
    instance, _, files = _built(task_id(task_type, "easy", 0))
    ref = _reference(instance)
    for name in [next(iter(files)), *(n for n in files if n in _HEADED)]:
        with pytest.raises(ValueError):
            ref.solve({**files, name: _headless(name, files[name])})
        with pytest.raises(ValueError):
            ref.solve({**files, name: b"\x89garbage\xff\xfe\x00" * 40})
    with pytest.raises(ValueError, match="not among the task's files"):
        ref.solve({})


@pytest.mark.parametrize("task_type", list(TASK_TYPES))
def test_mutators_and_predicates_never_raise_on_content_they_cannot_read(task_type: str
                                                                       ) -> None:
    # Strength calls them on whatever it holds (a window cut at a line end, a file its
    # reader refuses): an exception there would end the census, not skip one mutant.
    instance, _, files = _built(task_id(task_type, "easy", 0))
    ref = _reference(instance)
    garbage = b"\x89garbage\xff\xfe\x00\t,>\n" * 40
    for name, mutators in ref.mutators.items():
        half = files[name][:files[name].rfind(b"\n", 0, len(files[name]) // 2) + 1]
        for mutate in mutators:
            for content in (garbage, half, b""):
                out = mutate(content, random.Random(0))
                assert out is None or isinstance(out, bytes)
    for unread in ref.irrelevant.values():
        for record in (garbage, b"#x\n", b">\n", b"\n"):
            assert unread(record) in (True, False)


def test_a_variant_without_the_asked_subject_cannot_be_determined() -> None:
    # The sample renamed away in the header: a mutant (the answer moved), not a crash.
    instance, _, files = _built("vcf.het_count.easy.s0")
    sample = instance.question.split("sample ")[1].split()[0]
    renamed = files["calls.vcf.gz"].replace(sample.encode(), b"NA00000")
    assert _reference(instance).solve({"calls.vcf.gz": renamed}) == CANNOT_DETERMINE


# --- the shared readers ---

def test_fasta_records_reads_any_width_and_refuses_text_before_a_title() -> None:
    assert fasta_records(b">a x\nAC\nGT\n>b\r\nTTT\r\n") == [(b"a x", b"ACGT"), (b"b", b"TTT")]
    with pytest.raises(ValueError, match="before the first '>'"):
        fasta_records(b"ACGT\n>a\nAC\n")


_MTX = b"%%MatrixMarket matrix coordinate integer general\n% note\n3 2 2\n1 1 5\n3 2 1\n"


def test_read_mtx_reads_entries_after_comments_and_the_size_line() -> None:
    mtx = read_mtx(_MTX)
    assert mtx.shape == (3, 2) and mtx.entries.tolist() == [[1, 1, 5], [3, 2, 1]]
    assert mtx.edited({1: b"3 2 4\n"}, (b"2 2 7\n",)).endswith(b"3 2 3\n1 1 5\n3 2 4\n2 2 7\n")


@pytest.mark.parametrize(("content", "why"), [
    (_MTX.replace(b"3 2 2\n", b"3 2 3\n"), "states 3 entries"),
    (_MTX + b"2 1 1\n", "states 2 entries"),
    (_MTX.replace(b"3 2 1\n", b"4 2 1\n"), "outside the stated"),
    (_MTX.replace(b"1 1 5\n", b"1 1 5.5\n"), "not all integers"),
    (_MTX.split(b"\n", 1)[1], "banner"),
])
def test_read_mtx_refuses_a_matrix_its_size_line_does_not_describe(content: bytes, why: str
                                                                    ) -> None:
    with pytest.raises(ValueError, match=why):
        read_mtx(content)


def test_vcf_table_and_read_table_refuse_a_row_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="3 fields, the #CHROM header 2"):
        vcf_table(b"##x\n#CHROM\tPOS\nchr1\t5\t.\n")
    with pytest.raises(ValueError, match="no column 'arm'"):
        read_table("P1,B,5,1\n", ",", ("arm",))


@pytest.mark.parametrize(("base", "new", "tol", "differs"), [
    ("45.60", "45.62", 0.01, True), ("45.60", "45.61", 0.01, False), ("7", "8", 0, True),
    ("7", CANNOT_DETERMINE, 0, True), ("Trp53", "Trp53", 0, False)])
def test_moved_needs_a_margin_over_the_tolerance(base: str, new: str, tol: float,
                                                 differs: bool) -> None:
    assert moved(base, new, tol) is differs


_OWN_CONTROLS = ("mtx.qc_cells", "mtx.knockout_gene", "mtx.doublets", "tab.sentinel_mean",
                 "tab.label_coding", "tab.fold_change")
"""Types whose every file has family controls: pins of a file's decoded content (its
sorted lines, line count, digits) passed every generic control of it."""


@pytest.mark.parametrize("tid", [t for t in IDS if t.rsplit(".", 2)[0] in _OWN_CONTROLS])
def test_family_controls_keep_the_answer_and_change_the_content(tid: str) -> None:
    instance, _, files = _built(tid)
    ref = _reference(instance)
    # No file left to content pins: own controls, or irrelevant records dropped.
    assert all(name in ref.controls or "drop_irrelevant" in ref.controls_for(name)
               for name in files)
    for name, edits in ref.controls.items():
        for edit in edits:
            for draw in range(3):
                changed = edit(files[name], random.Random(draw))
                assert changed is not None and changed != files[name], (name, draw)
                assert _same(tid, ref.solve({**files, name: changed})), (name, draw)


_RENAMED_FASTA = ("seq.motif_count", "seq.gc_content", "seq.longest_orf")
"""FASTA types whose family control renames every record: the digits of the file (a
content pin that survived shuffling and re-wrapping) change, the answer does not."""


def _digits(content: bytes) -> int:
    return sum(content.count(bytes([d])) for d in b"0123456789")


@pytest.mark.parametrize("tid", [t for t in IDS if t.rsplit(".", 2)[0] in _RENAMED_FASTA])
def test_renamed_fasta_control_keeps_the_answer_and_moves_the_digits(tid: str) -> None:
    instance, _, files = _built(tid)
    ref = _reference(instance)
    (name,) = files
    assert ref.controls.get(name), "a FASTA question that never reads titles renames them"
    for edit in ref.controls[name]:
        for draw in range(3):
            changed = edit(files[name], random.Random(draw))
            assert changed is not None and _digits(changed) != _digits(files[name]), draw
            assert [s for _, s in fasta_records(changed)] == [
                s for _, s in fasta_records(files[name])], draw
            assert _same(tid, ref.solve({**files, name: changed})), draw


@pytest.mark.parametrize("tid", [t for t in IDS if t.startswith("tab.survival_median.")])
def test_renamed_patients_control_keeps_the_median_and_moves_every_sorted_line(tid: str
                                                                              ) -> None:
    instance, _, files = _built(tid)
    ref = _reference(instance)
    content = files["survival.csv"]
    for edit in ref.controls["survival.csv"]:
        for draw in range(3):
            changed = edit(content, random.Random(draw))
            assert changed is not None
            assert not set(changed.splitlines()[1:]) & set(content.splitlines()[1:]), draw
            assert _same(tid, ref.solve({**files, "survival.csv": changed})), draw
